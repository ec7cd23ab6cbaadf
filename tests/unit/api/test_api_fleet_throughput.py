"""The fleet view's headline: candidates judged per GPU-hour and busy %, per target, over a
recent window of the attempts table, with the suite's definitions and an ETag that still holds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api_doubles import parsing_loader  # this directory is on sys.path under pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Attempt, Track, Worker
from kernelband.db.session import session_scope
from services.api.app import create_app
from tests.utils.public_ids import row_id

# The newest heartbeat, a minute ago: the window ends there, not at answer time.
END = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=60)


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def app(settings: Settings, factory: sessionmaker[Session]) -> FastAPI:
    """A distributed deployment's API: no in-process workers, heartbeats come from rows."""
    return create_app(settings, session_factory=factory, problem_loader=parsing_loader)


def _at(seconds_before_end: float) -> datetime:
    return END - timedelta(seconds=seconds_before_end)


def _attempt(track: Track, kind: str, start: float | None, stop: float | None,
             worker: str | None = None) -> Attempt:
    """An attempt run from `start` to `stop` seconds before END (negative: after it)."""
    result = None if stop is None else {"ok": True, **({"_worker": {"name": worker}} if worker else {})}
    return Attempt(job_id=track.job_id, track_id=track.id, kind=kind,
                   state="dispatched" if stop is None else "done", queue="q", result=result,
                   started_at=None if start is None else _at(start),
                   finished_at=None if stop is None else _at(stop))


@pytest.fixture
def seeded(client: TestClient, auth: dict[str, str], job_body: Callable[..., dict[str, Any]],
           factory: sessionmaker[Session]) -> None:
    """Two h100 workers and the embedded-style cpu track over the last hour up to END.

    h100: gpu-a profiles 3000..2400 s before END and verifies 2700..2100 (overlapping: 900 s
    busy), profiles 1200..600 (600 s); gpu-b profiles 1800..1200 (600 s). cpu, no worker
    recorded: profiles 900..300. A compile began before the window (4000..3500: clipped to
    3600) and opens the active window; it closes at 300: 3300 s. Left out: a profile finished
    before the window, one still running, one finished after END (30 s after it)."""
    job = str(client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"])
    with session_scope(factory) as session:
        h100, cpu = (Track(job_id=row_id(session, job), target=t, status="running") for t in ("h100", "cpu"))
        session.add_all([h100, cpu])
        session.flush()
        session.add_all([
            _attempt(h100, "profile", 3000, 2400, "gpu-a"), _attempt(h100, "verify", 2700, 2100, "gpu-a"),
            _attempt(h100, "profile", 1200, 600, "gpu-a"), _attempt(h100, "profile", 1800, 1200, "gpu-b"),
            _attempt(cpu, "profile", 900, 300), _attempt(h100, "compile", 4000, 3500),
            _attempt(h100, "profile", 5000, 4000, "gpu-a"), _attempt(h100, "profile", 200, None, "gpu-b"),
            _attempt(h100, "profile", 100, -30, "gpu-a"), _attempt(h100, "generate", None, None),
        ])
        session.add_all([Worker(name="gpu-a", queue="gpu.h100", target="h100", last_heartbeat=END),
                         Worker(name="gpu-b", queue="gpu.h100", target="h100",
                                last_heartbeat=END - timedelta(seconds=4))])


def _targets(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["target"]: t for t in body["throughput"]["targets"]}


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.mark.usefixtures("seeded")
def test_the_last_hour_per_target_by_the_suites_definitions(client: TestClient,
                                                             auth: dict[str, str]) -> None:
    answer = client.get("/v1/fleet", headers=auth)
    assert answer.status_code == 200, answer.text
    throughput = answer.json()["throughput"]
    assert throughput["window_s"] == 3600
    assert (throughput["since"], throughput["until"]) == (_stamp(_at(3600)), _stamp(END))
    h100, cpu = _targets(answer.json())["h100"], _targets(answer.json())["cpu"]
    assert (h100["judged"], h100["devices"], h100["active_s"], h100["busy_s"]) == (3, 2, 3300.0, 2100.0)
    assert h100["per_hour"] == pytest.approx(3 * 3600 / (2 * 3300))  # judged per GPU-hour
    assert h100["busy_pct"] == pytest.approx(100 * 2100 / (2 * 3300))
    assert (h100["unit"], h100["estimated"]) == ("GPU-hour", False)
    assert h100["summary"] == ("h100: 2 candidates judged per GPU-hour; 3 in an active window of "
                               "3300 s on 2 GPUs, GPU busy with a profile or verify task 32% of it")
    assert (cpu["judged"], cpu["devices"], cpu["active_s"], cpu["busy_s"]) == (1, 1, 3300.0, 600.0)
    assert cpu["per_hour"] == pytest.approx(3600 / 3300)
    assert cpu["busy_pct"] == pytest.approx(100 * 600 / 3300)
    assert (cpu["unit"], cpu["estimated"]) == ("worker-hour", True)
    assert "estimated timings, no GPU" in cpu["summary"]


@pytest.mark.usefixtures("seeded")
def test_a_shorter_window_reads_only_its_attempts(client: TestClient, auth: dict[str, str]) -> None:
    body = client.get("/v1/fleet?window_s=1800", headers=auth).json()
    assert (body["throughput"]["window_s"], body["throughput"]["since"]) == (1800, _stamp(_at(1800)))
    h100, cpu = _targets(body)["h100"], _targets(body)["cpu"]
    # gpu-b's profile (1800..1200) and gpu-a's last (1200..600); the cpu one closes at 300
    assert (h100["judged"], h100["devices"], h100["active_s"], h100["busy_s"]) == (2, 2, 1500.0, 1200.0)
    assert h100["per_hour"] == pytest.approx(2 * 3600 / (2 * 1500))
    assert h100["busy_pct"] == pytest.approx(40.0)
    assert (cpu["judged"], cpu["busy_pct"]) == (1, pytest.approx(40.0))


@pytest.mark.parametrize(("query", "said"), [
    ("window_s=59", "'window_s': 59 is out of range; give the window in seconds, from 60 to 86400"),
    ("window_s=86401", "'window_s': 86401 is out of range"),
    ("window_s=-1", "from 60 to 86400 (default 3600: the last hour)"),
    ("window_s=1h", "'window_s': input should be a valid integer"),
])
def test_a_window_out_of_range_is_a_422_that_says_which_are_offered(
        client: TestClient, auth: dict[str, str], query: str, said: str) -> None:
    answer = client.get(f"/v1/fleet?{query}", headers=auth)
    assert answer.status_code == 422
    assert answer.json()["error"] == "invalid_request" and said in answer.json()["message"]


@pytest.mark.usefixtures("seeded")
def test_the_window_moves_with_the_etag(client: TestClient, app: FastAPI, auth: dict[str, str],
                                        factory: sessionmaker[Session], db_kind: str) -> None:
    first = client.get("/v1/fleet", headers=auth)
    tag = first.headers["ETag"]
    again = client.get("/v1/fleet", headers={**auth, "If-None-Match": tag})
    assert again.status_code == 304  # the attempt finished after END waits for a heartbeat
    if db_kind == "postgres":
        assert app.state.fast_poll.answered == 1  # the plain poll still takes the fast path
    shorter = client.get("/v1/fleet?window_s=1800", headers=auth)
    assert shorter.headers["ETag"] != tag  # another window, another representation
    assert client.get("/v1/fleet?window_s=1800",
                      headers={**auth, "If-None-Match": shorter.headers["ETag"]}).status_code == 304
    with session_scope(factory) as session:
        session.query(Worker).filter_by(name="gpu-b").one().last_heartbeat = END + timedelta(seconds=40)
    moved = client.get("/v1/fleet", headers={**auth, "If-None-Match": tag})
    assert moved.status_code == 200 and moved.headers["ETag"] != tag
    assert moved.json()["throughput"]["until"] == _stamp(END + timedelta(seconds=40))
    h100 = _targets(moved.json())["h100"]
    # the profile that ran from 100 s before END to 30 s after it now counts (gpu-a: 130 s
    # more), and the window runs from 3560 s before END (the clipped compile) to END + 30
    assert (h100["judged"], h100["active_s"], h100["busy_s"]) == (4, 3590.0, 2230.0)


def test_no_heartbeat_yet_means_no_figures(client: TestClient, auth: dict[str, str]) -> None:
    body = client.get("/v1/fleet", headers=auth).json()
    assert body["throughput"] == {"window_s": 3600, "since": None, "until": None, "targets": []}
