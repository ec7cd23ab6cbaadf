"""`kernelband profile` end to end: sandboxed load and profile, every number labelled."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from kernelband.commands import profile as profile_command

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


def _app() -> typer.Typer:
    app = typer.Typer()
    profile_command.register(app)
    app.command("noop", hidden=True)(lambda: None)  # keep `profile` a sub-command
    return app


def test_json_report_through_the_sandbox_labels_every_figure() -> None:
    result = CliRunner().invoke(_app(), ["profile", str(EXAMPLE), "--target", "cpu", "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["measurement"]["label"] == "estimated"
    assert "reference GPU" in report["measurement"]["method"]
    assert report["arch"] == "sm_90"
    for case in report["cases"]:
        for item in case["launches"]:
            assert item["static"]["label"] == "static" and item["estimate"]["label"] == "estimated"
    sources = {v["source"] for v in report["features_named"].values()}
    assert sources <= {"static", "estimate"}


def test_text_report_never_shows_an_unlabelled_time() -> None:
    result = CliRunner().invoke(_app(), ["profile", str(EXAMPLE), "--target", "a100"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "measured" not in result.output
    time_lines = [line for line in result.output.splitlines() if " us " in line]
    assert time_lines and all("estimated" in line for line in time_lines)
    assert "static" in result.output and "sm_80" in result.output


def test_bad_target_and_missing_file_say_what_to_do(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(_app(), ["profile", str(EXAMPLE), "--target", "v100"])
    assert bad.exit_code == 1 and "use one of" in bad.output
    missing = runner.invoke(_app(), ["profile", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2 and "is not a file" in missing.output
