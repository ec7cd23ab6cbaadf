"""The runner runs a TritonBench test as few times as it can without skipping a check."""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelband.evaluate import evaluate_candidate, judge
from kernelband.problem import KernelProblem, load_problem
from kernelband.problem import runtime as runtime_module
from kernelband.runner import correctness
from kernelband.runner.correctness import run_correctness
from kernelband.sandbox import SandboxLimits

os.environ.setdefault("TRITON_INTERPRET", "1")
RELU = Path(__file__).resolve().parents[3] / "kernelband" / "examples" / "tritonbench" / "relu.py"
LIMITS = SandboxLimits(wall_s=60.0, cpu_s=120, interpret=True)


def _counted_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    runs: list[tuple[str, int]] = []
    real = runtime_module.run_test

    def counted(module: Any, name: str, seed: int, device: str) -> dict[str, Any]:
        runs.append(("candidate" if "candidate" in module.__name__ else "original", seed))
        return real(module, name, seed, device)

    monkeypatch.setattr(runtime_module, "run_test", counted)
    return runs


def _relu(tmp_path: Path) -> KernelProblem:
    return load_problem(RELU.read_text(), "tritonbench", "relu", workdir=tmp_path, device="cpu")


def _run_original(tmp_path: Path, seeds: int) -> dict[str, Any]:
    """The original against itself, as `evaluate_candidate` asks its runner (in this process)."""
    problem = _relu(tmp_path)
    entries = judge.plan(problem, held_out=True, seeds=seeds, base_seed=11)
    payload = {"problem": problem.to_dict(), "editable": None, "device": "cpu", "count_launches": True,
               "steps": judge.steps(problem, entries, ("reference", "candidate")),
               "again": judge.again_steps(entries), "again_only_when_moved": True}
    with contextlib.chdir(tmp_path):
        return run_correctness(payload)


def test_determinism_reruns_the_test_once_not_once_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _counted_runs(monkeypatch)
    report = _run_original(tmp_path, seeds=2)
    assert report["status"] == "ok", report
    written = sorted(p.name for p in (tmp_path / "kb-outputs").glob("*.pt"))
    assert len(written) == 4 * 2 * 2 + 4  # three public cases and one held out, two seeds, both sides
    # per seed the reference and the candidate; on the first seed the candidate once more (the
    # determinism check of all four cases), not once more per case; the reference runs again
    # only where the candidate moved (relu never does)
    assert sorted(runs) == sorted([("original", 11), ("candidate", 11), ("candidate", 11),
                                   ("original", 12), ("candidate", 12)])


def test_nondeterministic_candidate_is_still_refused(tmp_path: Path) -> None:
    # the fifth call on (the second run of the test) leaves 1e-3 where relu gives 0
    flaky = RELU.read_text().split("#" * 20)[0].replace(
        "def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE",
        "def relu_kernel(x_ptr, out_ptr, n_elements, low, BLOCK_SIZE").replace(
        "x, 0.0)", "x, low)").replace(
        "def relu(x: torch.Tensor) -> torch.Tensor:\n",
        "_calls = [0]\n\n\ndef relu(x: torch.Tensor) -> torch.Tensor:\n    _calls[0] += 1\n").replace(
        "(x, out, n, BLOCK_SIZE", "(x, out, n, 1e-3 if _calls[0] > 4 else 0.0, BLOCK_SIZE")
    verdict = evaluate_candidate(_relu(tmp_path), flaky.rstrip() + "\n", held_out=True, seeds=1,
                                 limits=LIMITS, device="cpu")
    assert verdict.reason == "nondeterministic", verdict.message


def test_no_call_starts_while_an_earlier_calls_launches_are_alive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel reading memory it never wrote (past a stride-0 gradient, say) reads whatever the
    # allocator placed there; the reference, the candidate and its re-run agree only if no call
    # runs beside tensors an earlier call's launch records still hold.
    records: list[weakref.ref[Any]] = []
    alive_at_start: list[int] = []
    real = correctness.capture_launches

    @contextlib.contextmanager
    def watched(*args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        alive_at_start.append(sum(1 for r in records if r() is not None))
        with real(*args, **kwargs) as captured:
            yield captured
        records.extend(weakref.ref(record) for record in captured)

    monkeypatch.setattr(correctness, "capture_launches", watched)
    report = _run_original(tmp_path, seeds=2)
    assert report["status"] == "ok", report
    assert len(alive_at_start) >= 5 and records  # reference, candidate and re-run, two seeds
    assert alive_at_start == [0] * len(alive_at_start)


def test_a_check_on_a_loaded_runtime_leaves_no_guard_and_no_shared_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timing runner checks its candidate before timing it: afterwards its launches go through
    Triton's own code and each call runs the test, as in a runner that never checked."""
    from triton.runtime import jit

    from kernelband.evaluate.integrity import TimerSeal
    from kernelband.problem import cuda_guard
    from kernelband.problem.runtime import load_runtime

    problem = _relu(tmp_path)
    entries = judge.plan(problem, held_out=False, seeds=2, base_seed=7)
    payload = {"problem": judge.runner_problem(problem, entries), "count_launches": True,
               "steps": judge.steps(problem, entries, ("candidate",))}
    monkeypatch.chdir(tmp_path)
    runtime = load_runtime(problem, problem.editable, "cpu", workdir=tmp_path)
    report = correctness.check_loaded(runtime, payload, TimerSeal())
    assert report["status"] == "ok", report
    assert not getattr(jit.JITFunction.__dict__["run"], cuda_guard._MARK, False)
    assert runtime.share_runs is False and not runtime._unused
