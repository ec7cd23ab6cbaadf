"""The fair harness: same RNG states and zero-filled new tensors; the original against itself."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from kernelband.problem import load_problem
from kernelband.problem.fair import fair_scope, seed_everything
from kernelband.problem.selfcheck import SELF_RUNS, derived_tolerances, measure_spread

KERNEL = '''
import random
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) + tl.load(y + offs, mask=offs < n),
             mask=offs < n)


def add(x, y):
    out = torch.empty(x.numel() + 8, device=x.device)  # the tail is never written
    add_kernel[(1,)](x, y, out, x.numel(), BLOCK=64)
    return out
'''
SEPARATOR = "#" * 40


def _test(body: str) -> str:
    return f"{KERNEL}\n{SEPARATOR}\nimport torch\n\n\ndef test_add():\n{body}\n"


def test_seed_everything_aligns_torch_python_and_numpy() -> None:
    seed_everything(7)
    first = (torch.rand(3), random.random(), np.random.rand())
    seed_everything(7)
    second = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(first[0], second[0]) and first[1:] == second[1:]


def test_new_uninitialised_tensors_start_as_zeros() -> None:
    with fair_scope(0):
        scratch = torch.randn(1000)  # leaves garbage behind for the allocator
        del scratch
        assert not torch.empty(1000).any() and not torch.empty_like(torch.ones(4)).any()


def test_original_using_every_rng_and_empty_agrees_with_itself(workdir: Path) -> None:
    body = ("    n = 32 + random.randint(0, 8) + int(np.random.randint(0, 8))\n"
            "    x = torch.randn(n, device='cuda')\n"
            "    return {'case_a': add(x, torch.rand_like(x)), 'case_b': add(x, x)}")
    problem = load_problem(_test(body), "tritonbench", "fair", workdir=workdir, device="cpu")
    assert problem.self_spread == {} and not problem.allow_nondeterminism


def test_nondeterministic_original_is_marked_with_its_spread(workdir: Path) -> None:
    body = ("    x = torch.randn(16, device='cuda')\n"
            "    drift = torch.full_like(x, 1e-3 * len(_runs)); _runs.append(1)\n"
            "    return {'case_a': add(x, drift)[:16], 'case_b': add(x, x)}")
    source = _test(body).replace("def test_add", "_runs = []\n\n\ndef test_add")
    problem = load_problem(source, "tritonbench", "nondet", workdir=workdir, device="cpu")
    assert set(problem.self_spread) == {"case_a"}
    # the largest difference from the first run over the SELF_RUNS - 1 later runs
    assert abs((problem.self_spread["case_a"] or 0) - 1e-3 * (SELF_RUNS - 1)) < 1e-6
    assert problem.allow_nondeterminism
    assert problem.tolerance("float32")[0] >= 2e-3  # derived from the spread
    assert "Nondeterministic" in problem.description and "case_a" in problem.description


def test_an_original_that_drifts_only_in_a_later_run_and_in_item_values_is_marked(
    workdir: Path,
) -> None:
    body = ("    x = torch.randn(16, device='cuda')\n"
            "    _runs.append(1)\n"
            "    drift = 0.5 if len(_runs) == SELF_RUNS else 0.0\n"
            "    return {'norm': add(x, x).norm().item() + drift, 'same': add(x, x)}")
    source = _test(body).replace("def test_add", f"SELF_RUNS = {SELF_RUNS}\n_runs = []\n\n\ndef test_add")
    problem = load_problem(source, "tritonbench", "late", workdir=workdir, device="cpu")
    assert set(problem.self_spread) == {"norm"}
    assert abs((problem.self_spread["norm"] or 0) - 0.5) < 1e-9
    assert problem.tolerance("float64")[0] >= 1.0  # Python floats are compared as float64


def test_every_dtype_of_a_case_gets_a_tolerance_from_its_own_spread(workdir: Path) -> None:
    body = ("    x = torch.randn(64, device='cuda')\n"
            "    _runs.append(1)\n"
            "    q = (add(x, x) * 10).to(torch.int8) + len(_runs)\n"
            "    scale = add(x, x).abs().max().reshape(1) * (1 + 1e-3 * len(_runs))\n"
            "    return {'quantized': [q, scale]}")
    source = _test(body).replace("def test_add", "_runs = []\n\n\ndef test_add")
    problem = load_problem(source, "tritonbench", "mixed", workdir=workdir, device="cpu")
    assert problem.tolerance("int8")[0] >= 2 * (SELF_RUNS - 1)
    assert problem.tolerance("float32")[0] > 1e-4  # the scale's own spread, not int8's


def test_declared_tolerances_override_the_derived_ones() -> None:
    spreads = {"a": 0.5, "b": 1e-9}
    dtypes = {"a": "float16", "b": "float32"}
    derived = derived_tolerances(spreads, dtypes, {"float16": (0.1, 0.1)})
    assert "float16" not in derived and derived["float32"][0] == 1e-4


def test_spread_is_zero_for_identical_results_and_inf_for_nan_moves() -> None:
    x = torch.tensor([1.0, float("nan")])
    assert measure_spread({"a": x}, {"a": x.clone()}) == {}
    moved = measure_spread({"a": x}, {"a": torch.tensor([float("nan"), 1.0])})
    assert moved["a"] == float("inf")
