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


def test_the_gpu_held_alone_is_read_as_held_or_given_as_bounds(tmp_path: Path) -> None:
    from sqlalchemy import create_engine, select, update
    from sqlalchemy.orm import Session

    from kernelband.db.models import Attempt, Track

    sources = [s for s in read_directory(EXAMPLES) if s.name == "vector_add"]
    problems, failures = load_sources(sources, "native", load_problem_sandboxed)
    database = tmp_path / "suite.db"
    run_local_suite(Settings(database_url=f"sqlite:///{database}"), "held", "native", problems, failures,
                    SuiteSettings(targets=("cpu",), budget=2))

    def with_parts(parts: dict[str, float]) -> str:
        """The suite as if its steps had run on an H200 with these parts each."""
        with Session(create_engine(f"sqlite:///{database}")) as session:
            session.execute(update(Track).values(target="h200"))
            for attempt in session.scalars(select(Attempt).where(Attempt.kind == "profile")):
                attempt.result = {**(attempt.result or {}), "timings": parts}
            session.commit()
        return suite_steps.steps_markdown(database)

    bounds = with_parts({"measure_timed_rounds": 0.01, "measure_prepare": 0.02})
    assert "GPU-hour" in bounds and "held alone at least" in bounds and "whose prepare includes" in bounds
    held = with_parts({"measure_timed_rounds": 0.01, "measure_prepare": 0.02, "measure_held_alone": 0.015})
    assert "(as held)" in held and "at least" not in held
