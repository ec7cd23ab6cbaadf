"""Autotune picks read from one runner's modules and taken by another's, for unchanged kernels.

The CPU interpreter cannot time autotune configs (it has no benchmarking driver), so a pick is
set by hand here; a pinned kernel then runs without autotuning at all, which is what shows the
pin took.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
import torch

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the modules' kernels are decorated

from kernelband.runner import autotune  # noqa: E402

SOURCE = '''
import torch, triton, triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, SCALE * tl.load(x_ptr + offsets, mask=mask), mask=mask)

def entry(x):
    out = torch.empty_like(x)
    double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
'''


def _module(tmp_path: Path, name: str, scale: str = "2", source: str = SOURCE) -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(source.replace("SCALE", scale))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_pick_is_reported_with_its_config_and_taken_by_an_identical_kernel(tmp_path: Path) -> None:
    original, candidate = _module(tmp_path, "tuned_a"), _module(tmp_path, "tuned_b")
    tuner = autotune.autotuners([original])["double_kernel"]
    tuner.cache[(100, "torch.float32", "torch.float32")] = tuner.configs[1]
    picks = autotune.picks([original])
    assert picks["double_kernel"]["picks"] == [["(100, 'torch.float32', 'torch.float32')", 1]]
    assert "BLOCK: 64" in picks["double_kernel"]["configs"][0]

    assert autotune.pin([candidate], picks) == ["double_kernel"]
    x = torch.randn(100)
    torch.testing.assert_close(candidate.entry(x), 2 * x)  # no autotuning ran: the pick was taken
    assert autotune.autotuners([candidate])["double_kernel"].best_config is \
        autotune.autotuners([candidate])["double_kernel"].configs[1]


def test_a_changed_kernel_keeps_its_own_autotuning(tmp_path: Path) -> None:
    original, changed = _module(tmp_path, "tuned_c"), _module(tmp_path, "tuned_d", scale="3")
    tuner = autotune.autotuners([original])["double_kernel"]
    tuner.cache[(100, "torch.float32", "torch.float32")] = tuner.configs[0]
    assert autotune.pin([changed], autotune.picks([original])) == []
    assert autotune.autotuners([changed])["double_kernel"].cache == {}


@pytest.mark.parametrize("wanted", [
    {"double_kernel": "not a dict"},
    {"double_kernel": {"fingerprint": "x", "picks": [["(1,)", 0]]}},
    {"other": {"picks": []}},
])
def test_malformed_or_foreign_picks_pin_nothing(tmp_path: Path, wanted: dict[str, object]) -> None:
    module = _module(tmp_path, f"tuned_e{abs(hash(str(wanted)))}")
    assert autotune.pin([module], wanted) == []


def test_a_key_that_is_not_plain_values_or_an_index_out_of_range_is_skipped(tmp_path: Path) -> None:
    original, candidate = _module(tmp_path, "tuned_f"), _module(tmp_path, "tuned_g")
    fingerprint = autotune.fingerprint(autotune.autotuners([original])["double_kernel"])
    wanted = {"double_kernel": {"fingerprint": fingerprint,
                                "picks": [["<object at 0x1>", 0], ["(5,)", 7], ["(6,)", 1]]}}
    assert autotune.pin([candidate], wanted) == ["double_kernel"]
    assert list(autotune.autotuners([candidate])["double_kernel"].cache) == [(6,)]


HIDDEN = '''
import torch, triton, triton.language as tl

@triton.jit
def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)

KERNELS = {"double": triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
                                     key=["n"])(_double)}

def entry(x):
    out = torch.empty_like(x)
    KERNELS["double"][lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
'''


@pytest.mark.parametrize("hidden", [False, True], ids=["module global", "not a module global"])
def test_a_compile_only_pass_runs_every_config_once_times_none_and_forgets_its_picks(
        tmp_path: Path, hidden: bool) -> None:
    if hidden:  # an autotuner `autotuners()` cannot find is caught all the same
        module = _module(tmp_path, "hidden_tuner", source=HIDDEN)
        tuner = module.KERNELS["double"]
        assert autotune.autotuners([module]) == {}
    else:
        module = _module(tmp_path, "tuned_compile_only")
        tuner = autotune.autotuners([module])["double_kernel"]
    timed: list[int] = []

    def bench(kernel_call: object, quantiles: object = None) -> list[float]:
        kernel_call()  # type: ignore[operator]
        timed.append(1)
        return [1.0, 1.0, 1.0]

    tuner.__dict__["do_bench"] = bench  # the interpreter has no benchmarker of its own
    x = torch.randn(100)
    autotune.compile_only(True)
    try:
        torch.testing.assert_close(module.entry(x), 2 * x)
        ran = dict(tuner.configs_timings)
    finally:
        assert autotune.compile_only(False) == 1
    assert set(ran) == set(tuner.configs) and timed == []  # each config ran once, none was timed
    assert tuner.cache == {} and tuner.__dict__["do_bench"] is bench  # pick forgotten, timing back
    torch.testing.assert_close(module.entry(x), 2 * x)
    assert len(timed) == 2 and len(tuner.cache) == 1  # the next call times both configs


def test_a_compile_only_pass_started_twice_still_restores_the_timing(tmp_path: Path) -> None:
    module = _module(tmp_path, "tuned_twice")
    tuner = autotune.autotuners([module])["double_kernel"]
    autotune.compile_only(True)
    try:
        module.entry(torch.randn(100))
        autotune.compile_only(True)
    finally:
        assert autotune.compile_only(False) == 1
    assert "do_bench" not in tuner.__dict__ and tuner.cache == {}
