"""Embedded mode: thread-pool dispatcher, a local job on SQLite, the optimize command's errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scheduling_fakes import FAKE_TASKS, toy_problem
from typer.testing import CliRunner

from kernelband.config import Settings
from kernelband.scheduling.dispatch import EmbeddedDispatcher, TaskMessage, queue_for
from kernelband.scheduling.embedded import JobOptions, parse_targets, run_local_job, write_best


def test_embedded_dispatcher_runs_tasks_and_reports_errors() -> None:
    def broken(_payload: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("boom")

    dispatcher = EmbeddedDispatcher(2, {"verify": FAKE_TASKS["verify"], "compile": broken})
    dispatcher.submit(TaskMessage(1, "verify", "cpu", {}))
    dispatcher.submit(TaskMessage(2, "compile", "cpu", {"editable": "x"}))
    results: dict[int, dict[str, Any]] = {}
    started: set[int] = set()
    while len(results) < 2:
        for item in dispatcher.drain(timeout_s=5):
            if item.result.get("heartbeat"):  # a worker took the task (its lease starts now)
                started.add(item.attempt_id)
            else:
                results[item.attempt_id] = item.result
    dispatcher.close()
    assert started == {1, 2}, "every task announces its start before its result"
    assert results[1]["ok"] is True
    assert results[2]["ok"] is False and results[2]["reason"] == "task_error:ValueError"
    assert dispatcher.submitted == {"verify": 1, "compile": 1}


def test_queue_routing() -> None:
    assert queue_for("generate", "h100") == "llm"
    assert queue_for("compile", "h100") == "cpu"
    assert queue_for("profile", "h100") == "gpu.h100"
    assert queue_for("verify", "cpu") == "cpu"
    with pytest.raises(ValueError, match="unknown task kind"):
        queue_for("train", "cpu")


def test_local_job_runs_to_completion_and_writes_provenance(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", poll_interval_s=0.01)
    options = JobOptions(targets=("cpu", "h100"), budget=4, parallel=2, seed=3)
    outcome = run_local_job(settings, toy_problem(), options, functions=FAKE_TASKS)
    assert outcome.status == "completed"
    assert [t.target for t in outcome.tracks] == ["cpu", "h100"]
    assert outcome.attempts["generate"] == 8 and outcome.tokens == 8 * 150
    stages = {s.kind: s for s in outcome.stages}  # where the time went, per step
    assert stages["generate"].finished == 8 and stages["profile"].finished >= 8
    assert all(s.work_total_s >= 0 for s in outcome.stages)
    assert all(t.label == "estimated" for t in outcome.tracks)
    paths = write_best(outcome, toy_problem(), tmp_path / "best.py")
    assert [p.name for p in paths] == ["best_cpu.py", "best_h100.py"]
    text = paths[0].read_text()
    assert text.startswith("# Optimized by KernelBand") and "estimated" in text
    assert "import x" in text


def test_parse_targets_rejects_unknown() -> None:
    assert parse_targets(["cpu,h100", "cpu"]) == ("cpu", "h100")
    with pytest.raises(ValueError, match="choose from"):
        parse_targets(["v100"])


def test_optimize_command_explains_bad_input(tmp_path: Path) -> None:
    import typer

    from kernelband.commands import optimize

    app = typer.Typer()
    optimize.register(app)
    app.command("noop")(lambda: None)  # typer needs two commands to keep the name
    runner = CliRunner()
    missing = runner.invoke(app, ["optimize", str(tmp_path / "nope.py")])
    # the error is wrapped to the terminal's width: compare with single spaces
    assert missing.exit_code == 2 and "does not exist" in " ".join(missing.output.split())
    bad = runner.invoke(app, ["optimize", str(tmp_path), "--target", "v100"])
    assert bad.exit_code == 2 and "choose from" in " ".join(bad.output.split())
