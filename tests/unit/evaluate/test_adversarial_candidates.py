"""Cheating and crashing candidates are each rejected for their own reason; the host survives."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from kernelband.evaluate import Verdict, evaluate_candidate
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, run_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[3]
ADVERSARIAL = Path(__file__).parent / "adversarial"
ESCAPE = Path("/tmp/kb_adversarial_escape")
LIMITS = SandboxLimits(wall_s=5.0, cpu_s=60, memory_bytes=2 * 1024**3, max_procs=30)
ALLCLOSE = torch.allclose


def _header(path: Path, key: str) -> str:
    for line in path.read_text().splitlines():
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{path.name} has no '# {key}:' header")


@pytest.fixture(scope="module")
def vector_add() -> Iterator[KernelProblem]:
    source = (ROOT / "examples" / "vector_add.py").read_text()
    yield load_problem_sandboxed(source, "native", "vector_add", LIMITS)
    shutdown_pool()


def _limits(path: Path) -> SandboxLimits:
    """LIMITS, with the wall time a candidate's `# wall_s:` header asks for."""
    text = path.read_text()
    return replace(LIMITS, wall_s=float(_header(path, "wall_s"))) if "# wall_s:" in text else LIMITS


def _evaluate(problem: KernelProblem, path: Path, held_out: bool = True) -> Verdict:
    return evaluate_candidate(problem, path.read_text(), held_out=held_out, seeds=3,
                              limits=_limits(path), device="cpu",
                              static_checks=_header(path, "static") == "on")


CANDIDATES = sorted(ADVERSARIAL.glob("*.py"))


def test_suite_is_large_and_varied() -> None:
    assert len(CANDIDATES) >= 20
    assert len({_header(p, "expect") for p in CANDIDATES}) >= 12


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_candidate_is_rejected_for_its_own_reason(vector_add: KernelProblem, path: Path) -> None:
    cwd = os.getcwd()
    verdict = _evaluate(vector_add, path)
    assert not verdict.correct
    # stale memory holds garbage: any of its listed reasons (a|b) is right, nothing else
    assert verdict.reason in _header(path, "expect").split("|"), verdict.message
    assert verdict.message.startswith(verdict.reason)
    # the host is intact: nothing escaped, nothing patched here, the sandbox still works
    assert not ESCAPE.exists()
    assert os.getcwd() == cwd
    assert torch.allclose is ALLCLOSE
    assert run_sandboxed("kernelband.sandbox.probes:echo", {}, LIMITS).ok


def test_original_kernel_is_correct_on_all_cases(vector_add: KernelProblem) -> None:
    verdict = evaluate_candidate(vector_add, None, held_out=True, seeds=3, limits=LIMITS, device="cpu")
    assert verdict.correct, verdict.message
    assert verdict.reason == "ok"
    assert verdict.cases_checked == len(vector_add.cases) + len(vector_add.held_out_cases)
    assert verdict.held_out_checked == len(vector_add.held_out_cases)
    assert verdict.seeds == 3


def test_held_out_cheat_passes_public_cases_only(vector_add: KernelProblem) -> None:
    path = ADVERSARIAL / "heldout_wrong.py"
    assert _evaluate(vector_add, path, held_out=False).correct
    failed = _evaluate(vector_add, path, held_out=True)
    assert failed.reason == "wrong_result"
    assert "held-out case #" in failed.message
    assert "3001" not in failed.message and "777" not in failed.message  # no held-out shapes leak


def test_wrong_result_message_names_case_seed_and_error(vector_add: KernelProblem) -> None:
    verdict = _evaluate(vector_add, ADVERSARIAL / "cached_output.py")
    assert "case n1000, seed 1" in verdict.message
    assert "max_abs_err" in verdict.message and "> atol" in verdict.message
