"""Reports: read a seeded job from SQLite or the real API, write HTML + PNG, check the content."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from kernelband.cli import app as cli_app
from kernelband.config import Settings, get_settings
from kernelband.db import repository, session_scope
from kernelband.db.models import ArmStat, Candidate, Measurement, Track
from kernelband.report import (
    ReportError,
    from_database,
    from_server,
    write_job_report,
    write_report,
)
from kernelband.report.charts import speedup_series
from tests.utils.live_server import serve_in_thread
from tests.utils.public_ids import public_id

ORIGINAL = "def kernel():\n    BLOCK = 64\n    return BLOCK\n"
FASTER = "def kernel():\n    BLOCK = 256\n    return BLOCK\n"


def _paired(point: float, low: float, high: float) -> dict[str, object]:
    return {"speedup": point, "speedup_low": low, "speedup_high": high, "speedup_rounds": 20,
            "speedup_method": "ABBA rounds; 95% BCa", "speedup_baseline": "original"}


def _seed(factory: sessionmaker[Session]) -> int:
    """A job with one h100 track: original 2 ms (measured), a 0.5 ms child, a rejected child."""
    with session_scope(factory) as s:
        team = repository.get_or_create_team(s, "alpha")
        problem = repository.get_or_create_problem(s, team.id, "vec", "native", "#", {}, "h1")
        job = repository.create_job(s, team.id, problem.id, ["h100"], status="completed",
                                    budget_iterations=2, tokens_used=1200, cost_usd=0.0123)
        track = Track(job_id=job.id, target="h100", status="completed", iterations_done=2,
                      original_time_ms=2.0, held_out="passed")
        s.add(track)
        s.flush()
        original = Candidate(track_id=track.id, editable=ORIGINAL, status="measured")
        s.add(original)
        s.flush()
        child = Candidate(track_id=track.id, parent_id=original.id, lineage_depth=1,
                          strategy="tiling", editable=FASTER, status="measured")
        bad = Candidate(track_id=track.id, parent_id=original.id, lineage_depth=1,
                        strategy="fusion", editable="x", status="rejected",
                        reason="wrong_result:case=2,max_abs_err=0.5")
        unsure = Candidate(track_id=track.id, parent_id=original.id, lineage_depth=1,
                           strategy="pipeline", editable="y", status="measured")
        s.add_all([child, bad, unsure])
        s.flush()
        s.add_all([Measurement(candidate_id=c.id, label="measured", method="cuda_events",
                               device="NVIDIA H100", target="h100", time_ms=t, **paired)
                   for c, t, paired in ((original, 2.0, {}), (child, 0.5, _paired(4.0, 3.8, 4.2)),
                                        (unsure, 1.98, _paired(1.01, 0.97, 1.05)))])
        track.original_candidate_id, track.best_candidate_id = original.id, child.id
        track.best_time_ms, track.best_speedup, track.best_label = 0.5, 4.0, "measured"
        track.best_speedup_low, track.best_speedup_high = 3.8, 4.2
        track.best_speedup_method, track.best_speedup_final = "ABBA rounds; 95% BCa", True
        s.add(ArmStat(track_id=track.id, cluster=0, strategy="tiling", pulls=2, mean_reward=0.75,
                      masked=True, ucb_score=1.9))
        return job.id


def test_report_from_database_has_charts_tables_labels_and_diff(
        sqlite_factory: sessionmaker[Session], tmp_path: Path) -> None:
    job_id = _seed(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        data = from_database(session, job_id)
    series = speedup_series(data)
    assert series[0].points == ((1, 4.0), (3, 1.01))
    assert series[0].best == ((0, 1.0), (1, 4.0), (3, 4.0))
    assert series[0].intervals == ((1, 3.8, 4.2), (3, 0.97, 1.05))
    files = write_report(data, tmp_path)
    html = files.html.read_text()
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert len(re.findall(r'<circle class="pt"', html)) == 2
    assert len(re.findall(r'<line class="ci"', html)) == 2  # each point's 95% interval
    assert "4.00x [3.80, 4.20] <small>(final re-measure)</small>" in html
    assert "1.01x [0.97, 1.05], no significant speedup" in html
    assert "1.00x original" in html and "measured" in html and "NVIDIA H100" in html
    assert "wrong_result:case=2,max_abs_err=0.5" in html
    assert "-    BLOCK = 64" in html and "+    BLOCK = 256" in html
    assert "masked" in html and "1200 tokens" in html and "$0.0123" in html
    assert files.pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_from_server_matches_database_view(
        sqlite_factory: sessionmaker[Session], tmp_path: Path) -> None:
    from services.api.app import create_app
    from services.api.teams import create_token

    job_id = _seed(sqlite_factory)
    with session_scope(sqlite_factory) as session:
        token = create_token(session, "alpha")
        other = create_token(session, "beta")
    app = create_app(Settings(data_dir=tmp_path, broker_url=""), session_factory=sqlite_factory,
                     embedded=True)
    with serve_in_thread(app) as base_url:  # the real app over real HTTP
        public = public_id(sqlite_factory, "job", job_id)  # what the API shows the team
        data = from_server(base_url, token, public)
        with pytest.raises(ReportError, match="404"):
            from_server(base_url, other, public)
    assert speedup_series(data)[0].points == ((1, 4.0), (3, 1.01))
    best = data.job["tracks"][0]["best"]
    assert best["label"] == "measured" and best["speedup_text"] == "4.00x [3.80, 4.20]"
    with session_scope(sqlite_factory) as session:  # the same shapes from either source
        assert from_database(session, job_id).job["tracks"][0]["best"]["speedup_text"] == \
            best["speedup_text"]
    assert len(data.candidates) == 4 and data.arms["h100"][0]["masked"] is True


def test_report_command_writes_files_and_explains_a_missing_job(
        sqlite_url: str, sqlite_factory: sessionmaker[Session], tmp_path: Path) -> None:
    job_id = _seed(sqlite_factory)
    files = write_job_report(sqlite_url, job_id, tmp_path / "direct")
    assert files.html.exists()
    env = {"KERNELBAND_DATABASE_URL": sqlite_url}
    get_settings.cache_clear()  # the command must read this environment, not an earlier test's
    result = CliRunner().invoke(cli_app, ["report", str(job_id), "--out", str(tmp_path / "cli")], env=env)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cli" / f"job{job_id}.html").exists()
    assert (tmp_path / "cli" / f"job{job_id}-speedup.png").exists()
    missing = CliRunner().invoke(cli_app, ["report", "999", "--out", str(tmp_path)], env=env)
    assert missing.exit_code == 2 and "not in this database" in missing.output
    get_settings.cache_clear()
