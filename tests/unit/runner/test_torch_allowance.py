"""The decoy check weighs a candidate's torch work against the original's, in region functions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernelband.evaluate import evaluate_candidate
from kernelband.problem import KernelProblem
from kernelband.problem.region_scope import RegionScope
from kernelband.runner.torch_work import TORCH_WORK_SLACK, TorchWork, allowance
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, interpret=True)
REGION = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x, out, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) * s, mask=offs < n)


def scaled(x):
    s = float(x.abs().max())  # the original's own torch work: one read of x
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, s, x.numel(), BLOCK=256)
    return out
'''
HARNESS = '''
########################################

def test_scaled():
    # the harness computes with torch too: input creation, glue and a reduction
    x = torch.randn(4096, device="cuda")
    noise = torch.randn_like(x) * 0.0
    out = scaled(x + noise)
    return {"a": out, "b": torch.sum(out.reshape(64, 64), dim=1), "c": scaled(x * 2)}
'''
DECOY = REGION.replace("    return out\n", "    return torch.softmax(x, 0) * 0 + (x @ x) * 0 + out\n")


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield load_problem_sandboxed(REGION + HARNESS, "tritonbench", "allowance", LIMITS)
    shutdown_pool()


def test_original_whose_harness_and_wrapper_use_torch_is_accepted(problem: KernelProblem) -> None:
    verdict = evaluate_candidate(problem, None, seeds=2, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message


def test_candidate_doing_the_originals_torch_work_is_accepted(problem: KernelProblem) -> None:
    verdict = evaluate_candidate(problem, REGION, seeds=1, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message


def test_candidate_computing_more_with_torch_is_a_decoy(problem: KernelProblem) -> None:
    verdict = evaluate_candidate(problem, DECOY, seeds=1, limits=LIMITS, device="cpu")
    assert verdict.reason == "decoy_torch_compute", verdict.message
    assert "against the original's" in verdict.message


def test_only_calls_under_region_functions_count(tmp_path: Path) -> None:
    path = tmp_path / "scoped.py"
    path.write_text("import torch\n\ndef region(x):\n    return torch.sum(x)\n\n"
                    "def harness(x):\n    return torch.sum(x) + region(x)\n")
    namespace: dict[str, object] = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    work = TorchWork(RegionScope(str(path), 1, 4))
    with work:
        namespace["harness"](torch.ones(10))  # type: ignore[operator]
    assert work.elements == 10  # the region's sum, not the harness's


def test_allowance_is_the_originals_work_plus_the_slack() -> None:
    assert allowance(1000) == pytest.approx(1000 * (1 + TORCH_WORK_SLACK))
    assert allowance(0) == 0
