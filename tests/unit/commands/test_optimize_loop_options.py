"""`kernelband optimize --repair-turns N --no-dedupe` reach the job; bad values are explained."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from kernelband.scheduling.embedded import JobOptions, job_columns


def test_loop_options_become_job_columns() -> None:
    columns = job_columns(JobOptions(repair_turns=2, dedupe=False))
    assert columns["repair_turns"] == 2 and columns["dedupe"] is False
    assert job_columns(JobOptions())["repair_turns"] == 1


def test_out_of_range_repair_turns_are_refused(tmp_path: Path) -> None:
    from kernelband.commands import optimize

    app = typer.Typer()
    optimize.register(app)
    app.command("noop")(lambda: None)  # typer needs two commands to keep the name
    result = CliRunner().invoke(app, ["optimize", str(tmp_path), "--repair-turns", "9"])
    assert result.exit_code == 2 and "between 0 and 5" in " ".join(result.output.split())
