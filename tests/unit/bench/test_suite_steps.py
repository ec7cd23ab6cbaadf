"""A suite's steps and report read back from its database (bench/gpu/suite_steps.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.gpu import suite_steps
from kernelband.config import Settings
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.suite import SuiteSettings, load_sources, read_directory
from kernelband.suite.embedded import run_local_suite

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_every_device_step_of_a_suite_is_a_row_and_its_report_is_rebuilt(tmp_path: Path) -> None:
    sources = [s for s in read_directory(EXAMPLES) if s.name == "vector_add"]
    problems, failures = load_sources(sources, "native", load_problem_sandboxed)
    database = tmp_path / "suite.db"
    report = run_local_suite(Settings(database_url=f"sqlite:///{database}"), "steps", "native", problems,
                             failures, SuiteSettings(targets=("cpu",), budget=2))
    assert report.finished

    out, rebuilt = tmp_path / "steps.md", tmp_path / "report.json"
    assert suite_steps.main([str(database), "--out", str(out), "--report", str(rebuilt)]) == 0
    text = out.read_text()
    profiles = next(s for s in report.steps if s.kind == "profile")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "| vector_add | profile |" in line]
    assert len(rows) == profiles.finished
    assert f"| median of {profiles.finished} | | profile |" in text
    assert report.throughput[0].describe() in text

    kept = json.loads(rebuilt.read_text())["report"]
    assert kept["problems"] == report.to_dict()["problems"]
    assert kept["throughput"] == [t.to_dict() for t in report.throughput]


def test_a_missing_database_is_named(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no such suite database"):
        suite_steps.main([str(tmp_path / "absent.db")])
