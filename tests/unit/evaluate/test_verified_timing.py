"""Timed calls are checked: call counting and caching by identity, address or fingerprint fail."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from kernelband.evaluate.verified_timing import (
    STRICT,
    TimingRejected,
    VerifiedRuns,
    VerifyConfig,
    salt,
)
from kernelband.problem import KernelProblem
from kernelband.profile.timing import TimingConfig, measure
from kernelband.runner.timing_check import HostDevice, check_timing
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[3]
TIMING_CANDIDATES = sorted((Path(__file__).parent / "adversarial" / "timing").glob("*.py"))
LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, memory_bytes=2 * 1024**3, max_procs=30)
CONFIG = TimingConfig(warmup=2, min_reps=20, max_reps=20, budget_ms=0.0, flush_l2=False)
CASE = SimpleNamespace(name="n512")
PROBLEM = SimpleNamespace(inplace_outputs=(), tolerance=lambda dtype: (1e-5, 1e-5))
Candidate = Callable[[list[Any]], Any]


class AddRuntime:
    """A trusted stand-in for a problem runtime: out = x + y on seeded inputs."""

    def __init__(self, candidate: Candidate) -> None:
        self.candidate_fn = candidate

    def inputs(self, case: Any, seed: int) -> list[Any]:
        gen = torch.Generator().manual_seed(seed)
        return [torch.randn(4, 128, generator=gen), torch.randn(4, 128, generator=gen)]

    def reference(self, args: list[Any]) -> Any:
        return args[0] + args[1]

    def candidate(self, args: list[Any]) -> Any:
        return self.candidate_fn(args)


def _timed(candidate: Candidate, config: VerifyConfig | None = None) -> dict[str, Any]:
    runs = VerifiedRuns(AddRuntime(candidate), PROBLEM, CASE, config, rng=random.Random(7))  # type: ignore[arg-type]
    measure(HostDevice(), runs.prepare, CONFIG)
    return runs.finish()


def _honest(args: list[Any]) -> Any:
    return args[0] + args[1]


def test_an_honest_candidate_passes_and_some_late_call_is_checked() -> None:
    summary = _timed(_honest)
    assert summary["calls"] >= CONFIG.warmup + CONFIG.min_reps  # plus untimed probe calls
    assert 1 <= summary["verified_calls"] < summary["calls"]
    assert summary["buffer_sets"] == 3


def test_strict_protocol_checks_every_call() -> None:
    summary = _timed(_honest, STRICT)
    assert summary["verified_calls"] == summary["calls"] and summary["strict"]


def test_call_counting_is_caught_on_a_late_call() -> None:
    calls = [0]

    def counting(args: list[Any]) -> Any:
        calls[0] += 1
        return args[0] + args[1] if calls[0] <= 5 else torch.zeros_like(args[0])

    with pytest.raises(TimingRejected) as caught:
        _timed(counting)
    assert caught.value.reason.startswith("timing_output_mismatch:call=")
    assert int(caught.value.reason.split("=")[1]) >= 5


@pytest.mark.parametrize("key", ["address", "identity", "fingerprint"])
def test_a_result_cached_by_a_key_is_caught(key: str) -> None:
    cache: dict[Any, torch.Tensor] = {}

    def keyed(args: list[Any]) -> Any:
        x, y = args
        k = {"address": lambda: (x.data_ptr(), y.data_ptr()), "identity": lambda: (id(x), id(y)),
             "fingerprint": lambda: (float(x[0, 0]), float(x[-1, -1]), float(y[0, 0]))}[key]()
        if k not in cache:
            cache[k] = x + y
        return cache[k].clone()

    with pytest.raises(TimingRejected) as caught:
        _timed(keyed, STRICT)
    assert caught.value.reason.startswith("timing_output_mismatch:call=")


def test_a_sets_second_call_reuses_its_first_calls_allocation_refilled() -> None:
    seen: list[tuple[int, int, torch.Tensor]] = []

    def recording(args: list[Any]) -> Any:
        seen.append((id(args), args[0].data_ptr(), args[0].clone()))
        args[0].zero_()  # scribbles on its copy: the refill must restore the set's values
        return args[1].clone()

    runs = VerifiedRuns(AddRuntime(recording), PROBLEM, CASE, VerifyConfig(buffer_sets=1, probe_fraction=0.0),  # type: ignore[arg-type]
                        rng=random.Random(3))
    for _ in range(2):
        runs.prepare()()
        runs.pending = None  # results are not the point here
    (first_id, first_ptr, _), (second_id, second_ptr, second_x) = seen
    assert (second_id, second_ptr) == (first_id, first_ptr)
    assert torch.equal(second_x, runs.sets[0][0])


def test_a_copy_a_call_resized_is_not_refilled_but_made_anew() -> None:
    def resizing(args: list[Any]) -> Any:
        out = args[0] + args[1]
        args[0].resize_(2)  # leaves its copy unusable for the next call on this set
        return out

    runs = VerifiedRuns(AddRuntime(resizing), PROBLEM, CASE, VerifyConfig(buffer_sets=1, probe_fraction=0.0),  # type: ignore[arg-type]
                        rng=random.Random(3))
    with pytest.raises(TimingRejected) as caught:  # refused for what it did, not a crash
        for _ in range(3):
            runs.prepare()()
        runs.finish()
    assert caught.value.reason.startswith("timing_input_mutated:call=")


def test_buffer_sets_differ_in_contents_and_addresses() -> None:
    runs = VerifiedRuns(AddRuntime(_honest), PROBLEM, CASE, rng=random.Random(1))  # type: ignore[arg-type]
    pointers = {s[0].data_ptr() for s in runs.sets}
    assert len(pointers) == len(runs.sets)
    assert not torch.equal(runs.sets[0][0], runs.sets[1][0])


def test_salt_changes_elements_only_to_values_of_the_same_row() -> None:
    x = torch.arange(40, dtype=torch.float32).reshape(4, 10)
    before = x.clone()
    salt([x, torch.arange(5)], 8, random.Random(3))
    assert not torch.equal(x, before)
    for row in range(4):
        assert set(x[row].tolist()) <= set(before[row].tolist())


class DeferringRuntime(AddRuntime):
    """Its candidate returns at once; the work lands later, while the harness does other work
    (as a kernel left running on a side stream, or a background thread, would)."""

    def __init__(self) -> None:
        super().__init__(self._deferred)
        self.late: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _deferred(self, args: list[Any]) -> Any:
        out = torch.zeros_like(args[0])
        self.late.append((out, args[0] + args[1]))
        return out

    def reference(self, args: list[Any]) -> Any:
        while self.late:
            out, value = self.late.pop()
            out.copy_(value)
        return super().reference(args)


def test_work_finishing_after_the_call_returned_is_caught() -> None:
    runs = VerifiedRuns(DeferringRuntime(), PROBLEM, CASE, STRICT, rng=random.Random(2))  # type: ignore[arg-type]
    with pytest.raises(TimingRejected) as caught:
        measure(HostDevice(), runs.prepare, CONFIG)
    assert caught.value.reason == "timing_output_changed_after_return:call=0"


def test_input_mutation_in_a_timed_call_is_caught() -> None:
    def mutating(args: list[Any]) -> Any:
        out = args[0] + args[1]
        args[1].zero_()
        return out

    with pytest.raises(TimingRejected) as caught:
        _timed(mutating, STRICT)
    assert caught.value.reason == "timing_input_mutated:call=0"


def test_a_timer_replaced_during_the_timed_runs_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def patching(args: list[Any]) -> Any:
        monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
        return args[0] + args[1]

    with pytest.raises(TimingRejected) as caught:
        _timed(patching)
    assert caught.value.reason == "timer_tampered"


@pytest.fixture(scope="module")
def vector_add() -> Iterator[KernelProblem]:
    source = (ROOT / "examples" / "vector_add.py").read_text()
    yield load_problem_sandboxed(source, "native", "vector_add", LIMITS)
    shutdown_pool()


def test_the_original_kernel_passes_verified_timing_in_the_sandbox(vector_add: KernelProblem) -> None:
    result = check_timing(vector_add, None, limits=LIMITS)
    assert result["ok"], result["message"]
    assert result["timer"] == "host timer (cpu)"
    assert set(result["case_times_ms"]) == {c.name for c in vector_add.cases}
    assert all(c["verified_calls"] >= 1 for c in result["checks"])


@pytest.mark.parametrize("path", TIMING_CANDIDATES, ids=lambda p: p.stem)
def test_timing_phase_cheat_is_rejected_for_its_own_reason(vector_add: KernelProblem, path: Path) -> None:
    expect = path.read_text().splitlines()[0].split(":", 1)[1].strip()
    result = check_timing(vector_add, path.read_text(), limits=LIMITS, strict=True)
    assert not result["ok"]
    assert result["reason"].startswith(f"{expect}:call="), result["message"]



def test_probe_calls_capture_launches_and_refuse_another_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.evaluate import integrity

    streams = iter([7, 7, 7])  # the timed stream, as the harness sees it
    monkeypatch.setattr(integrity, "current_stream", lambda: next(streams, 7))
    side = SimpleNamespace(kernel_name="add_kernel", stream=9)

    class SideStream(AddRuntime):
        def candidate(self, args: list[Any]) -> Any:
            from kernelband.profile import launches

            for records, _ in launches._sinks:  # what a launch on stream 9 would record
                records.append(side)  # type: ignore[arg-type]
            return args[0] + args[1]

    config = VerifyConfig(probe_fraction=1.0)
    runs = VerifiedRuns(SideStream(_honest), PROBLEM, CASE, config, rng=random.Random(4))  # type: ignore[arg-type]
    with pytest.raises(TimingRejected) as caught:
        runs.prepare()
    assert caught.value.reason == "timing_side_stream_launch:call=0"
