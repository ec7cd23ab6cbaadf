"""The checks run a TritonBench test as few times as they can without skipping a check."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kernelband.evaluate.checks import evaluate_target
from kernelband.problem import load_problem
from kernelband.problem import runtime as runtime_module

os.environ.setdefault("TRITON_INTERPRET", "1")
RELU = Path(__file__).resolve().parents[3] / "kernelband" / "examples" / "tritonbench" / "relu.py"


def _counted_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    runs: list[tuple[str, int]] = []
    real = runtime_module.run_test

    def counted(module: Any, name: str, seed: int, device: str) -> dict[str, Any]:
        runs.append(("candidate" if "candidate" in module.__name__ else "original", seed))
        return real(module, name, seed, device)

    monkeypatch.setattr(runtime_module, "run_test", counted)
    return runs


def _evaluate(tmp_path: Path, editable: str | None, seeds: int) -> dict[str, Any]:
    problem = load_problem(RELU.read_text(), "tritonbench", "relu", workdir=tmp_path, device="cpu")
    os.chdir(tmp_path)
    payload = {"problem": problem.to_dict(), "editable": editable, "device": "cpu",
               "seeds": seeds, "held_out": True, "base_seed": 11}
    return evaluate_target(payload)


def test_determinism_reruns_the_test_once_not_once_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _counted_runs(monkeypatch)
    verdict = _evaluate(tmp_path, None, seeds=2)
    assert verdict["correct"], verdict["message"]
    assert verdict["cases_checked"] == 4  # three public cases and one held out
    # per seed the reference and the candidate; on the first seed the candidate once more (the
    # determinism check of all four cases), not once more per case
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
    verdict = _evaluate(tmp_path, flaky.rstrip() + "\n", seeds=1)
    assert verdict["reason"] == "nondeterministic", verdict["message"]
