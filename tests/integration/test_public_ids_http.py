"""Over HTTP on Postgres: the ids a team sees say nothing of how much other teams submitted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import session_scope
from kernelband.db.models import Candidate, Event, Track
from services.api.teams import create_token
from tests.utils.api_process import api_process
from tests.utils.public_ids import row_id

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
PUBLIC = re.compile(r"(job|cand)_[0-9a-z]{13}")
DIGITS = "0123456789abcdefghjkmnpqrstvwxyz"


@pytest.fixture
def teams(factory: sessionmaker[Session]) -> dict[str, dict[str, str]]:
    """Bearer headers of teams a and b (the tables were just emptied)."""
    with session_scope(factory) as session:
        return {name: {"Authorization": f"Bearer {create_token(session, name, 't')}"}
                for name in ("a", "b")}


@pytest.fixture
def api(postgres_url: str, tmp_path: Path,
        teams: dict[str, dict[str, str]]) -> Iterator[httpx.Client]:
    """The API by its documented command, started after the tables were emptied."""
    with api_process(postgres_url, tmp_path) as (url, _), \
            httpx.Client(base_url=url, timeout=120) as client:
        yield client


def _submit(api: httpx.Client, team: dict[str, str]) -> str:
    body = {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
            "targets": ["cpu"], "budget": {"iterations": 1}}
    answer = api.post("/v1/jobs", json=body, headers=team)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    assert answer.headers["location"] == f"/v1/jobs/{job_id}"
    return job_id


def _number(public_id: str) -> int:
    """The id's characters read as a number (what a team could compare)."""
    value = 0
    for char in public_id.partition("_")[2]:
        value = value * 32 + DIGITS.index(char)
    return value


def _seed_candidates(factory: sessionmaker[Session], job: str, count: int) -> None:
    """`count` candidates on the job's cpu track, as the scheduler writes them, and an event."""
    with session_scope(factory) as session:
        job_id = row_id(session, job)
        track = Track(job_id=job_id, target="cpu", status="running")
        session.add(track)
        session.flush()
        rows = [Candidate(track_id=track.id, editable="x", status="generated")
                for _ in range(count)]
        session.add_all(rows)
        session.flush()
        session.add(Event(job_id=job_id, seq=1, kind="candidate_generated",
                          payload={"target": "cpu", "candidate": rows[-1].id, "parent": None}))


def test_ids_hide_other_teams_volume_and_forged_ids_are_404(
    api: httpx.Client, teams: dict[str, dict[str, str]], factory: sessionmaker[Session],
) -> None:
    a, b = teams["a"], teams["b"]
    first = _submit(api, a)
    others = [_submit(api, b) for _ in range(3)]  # team b's jobs between team a's
    second, third = _submit(api, a), _submit(api, a)  # then two of a's in a row
    ids = [first, *others, second, third]
    assert all(PUBLIC.fullmatch(i) for i in ids) and len(set(ids)) == len(ids)
    rows = [row_id(factory, i) for i in ids]
    assert rows == list(range(rows[0], rows[0] + 6))  # the rows are consecutive ...
    # ... but the ids a sees are not: 3 jobs between first and second, none between second
    # and third, and neither gap shows (no small difference, no order to count on).
    for earlier, later in ((first, second), (second, third)):
        assert abs(_number(later) - _number(earlier)) > 2**32
    assert len({i[4:8] for i in (first, second, third)}) == 3  # no shared leading characters

    # Round trip: the id a job was created with reads it back, lists it, opens its page.
    assert api.get(f"/v1/jobs/{first}", headers=a).json()["id"] == first
    listed = [j["id"] for j in api.get("/v1/jobs", headers=a).json()["jobs"]]
    assert listed == [third, second, first]
    assert api.get(f"/ui/jobs/{first}").status_code == 200

    # Another team's id, a forged one, a mangled one and a row number answer alike: 404.
    forged = first[:-1] + ("0" if first[-1] != "0" else "1")
    messages = set()
    for other in (others[0], forged, first.upper(), str(rows[0]), "cand" + first[3:]):
        answer = api.get(f"/v1/jobs/{other}", headers=a)
        assert answer.status_code == 404 and answer.json()["error"] == "not_found", other
        messages.add(answer.json()["message"].replace(other, "ID"))
        assert api.get(f"/ui/jobs/{other}").status_code in (200, 404)  # no token: exists or not
    assert len(messages) == 1  # the same words whichever it was
    assert api.get(f"/ui/jobs/{forged}").status_code == 404
    assert api.get(f"/v1/jobs/{forged}").status_code == 401  # no token: nothing at all

    # Candidates: 5 of team b's rows between a's two jobs' candidates.
    _seed_candidates(factory, first, 1)
    _seed_candidates(factory, others[0], 5)
    _seed_candidates(factory, second, 1)
    (c1,) = api.get(f"/v1/jobs/{first}/candidates", headers=a).json()["candidates"]
    (c2,) = api.get(f"/v1/jobs/{second}/candidates", headers=a).json()["candidates"]
    assert PUBLIC.fullmatch(c1["id"]) and c1["id"].startswith("cand_")
    assert row_id(factory, c2["id"]) - row_id(factory, c1["id"]) == 6
    assert abs(_number(c2["id"]) - _number(c1["id"])) > 2**32
    assert api.get(f"/v1/jobs/{first}/candidates/{c1['id']}", headers=a).json()["id"] == c1["id"]
    for wrong in (c2["id"], first, c1["id"][:-1] + "z" * (c1["id"][-1] != "z") or "y"):
        assert api.get(f"/v1/jobs/{first}/candidates/{wrong}", headers=a).status_code == 404
    # The event's candidate is the public id, polled and streamed alike.
    (event,) = api.get(f"/v1/jobs/{first}/events", headers=a).json()["events"]
    assert event["payload"]["candidate"] == c1["id"]
    with api.stream("GET", f"/v1/jobs/{first}/events",
                    headers={**a, "Accept": "text/event-stream"}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                assert f'"candidate":"{c1["id"]}"' in line
                break
