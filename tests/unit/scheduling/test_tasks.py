"""The task bodies with the real generator, evaluator and sandbox on a bundled example."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.evaluate.verdict import Verdict
from kernelband.problem.model import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed
from kernelband.scheduling import candidate_tasks, tasks

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


@pytest.fixture(scope="module")
def problem() -> KernelProblem:
    return load_problem_sandboxed(EXAMPLE.read_text(), "native", "vector_add")


def test_generate_with_rules_returns_a_child(problem: KernelProblem) -> None:
    result = tasks.generate({"problem": problem.to_dict(), "parent_editable": problem.editable,
                             "strategy": "tiling", "seed": 1, "model": "",
                             "profile_summary": [{"label": "time", "value": 1.0, "unit": "ms",
                                                  "source": "estimated"}]})
    assert set(result) >= {"ok", "editable", "reason", "prompt_tokens", "cost_known"}
    assert result["ok"] is False or result["editable"].strip()


def test_compile_prescreens_on_public_cases(problem: KernelProblem) -> None:
    good = tasks.compile({"problem": problem.to_dict(), "editable": problem.editable,
                          "target": "h100"})
    assert good["ok"] is True and good["verdict"]["correct"] is True
    assert good["verdict"]["held_out_checked"] == 0
    assert good["static_profile"] is not None  # a report, or the reason it could not be built
    assert set(good["timings"]) == {"check", "static"} and good["timings"]["check"] > 0
    decoy = "def entry(x, y):\n    return x + y\n"
    bad = tasks.compile({"problem": problem.to_dict(), "editable": decoy, "target": "h100"})
    assert bad["ok"] is False and bad["reason"]


def test_compile_for_cpu_target_runs_static_checks_only(problem: KernelProblem) -> None:
    sneaky = problem.editable + "\nimport os\nos.system('true')\n"
    result = tasks.compile({"problem": problem.to_dict(), "editable": sneaky, "target": "cpu"})
    assert result["ok"] is False and result["reason"]
    fine = tasks.compile({"problem": problem.to_dict(), "editable": problem.editable,
                          "target": "cpu"})
    assert fine["ok"] is True


def test_verify_checks_held_out_cases(problem: KernelProblem) -> None:
    result = tasks.verify({"problem": problem.to_dict(), "editable": problem.editable,
                           "target": "cpu"})
    assert result["ok"] is True and result["verdict"]["held_out_checked"] > 0
    assert result["timings"]["check"] > 0  # wall seconds of the sandboxed held-out run


def test_a_task_runs_its_sandbox_work_under_the_jobs_limits(
    problem: KernelProblem, monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[SandboxLimits] = []

    def evaluate(*args: object, **kwargs: object) -> Verdict:
        seen.append(SandboxLimits.from_settings())
        return Verdict.reject("wrong_result", "recorded")

    monkeypatch.setattr(candidate_tasks, "evaluate_candidate", evaluate)
    payload = {"problem": problem.to_dict(), "editable": problem.editable, "target": "h100"}
    tasks.verify({**payload, "limits": {"compile_s": 600, "run_s": 20}})
    tasks.verify(payload)
    assert (seen[0].compile_s, seen[0].wall_s) == (600.0, 20.0)
    assert seen[1] == SandboxLimits.from_settings()


def test_compile_on_a_gpu_node_leaves_the_check_to_the_profile_step(
    problem: KernelProblem, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def evaluate(*args: object, **kwargs: object) -> Verdict:
        raise AssertionError("the GPU node's compile step ran the candidate")

    monkeypatch.setattr(candidate_tasks, "detect_device", lambda: "cuda")
    monkeypatch.setattr(candidate_tasks, "evaluate_candidate", evaluate)
    fine = tasks.compile({"problem": problem.to_dict(), "editable": problem.editable, "target": "h100"})
    assert fine["ok"] is True and "profile step on this GPU" in fine["message"]
    assert set(fine["timings"]) == {"static"} and fine["static_profile"] is not None
    sneaky = problem.editable + "\nimport os\nos.system('true')\n"
    refused = tasks.compile({"problem": problem.to_dict(), "editable": sneaky, "target": "h100"})
    assert refused["ok"] is False and refused["reason"]
