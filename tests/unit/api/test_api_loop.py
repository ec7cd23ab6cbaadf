"""Generation-loop endpoints: the repair chain and transcripts of a job (downloadable), the
loop's job parameters, and the team skill library (listed, switched off, deleted, per team)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Candidate, Skill, Team, Track, Transcript
from kernelband.db.session import session_scope
from tests.utils.public_ids import public_id, row_id

Body = Callable[..., dict[str, Any]]
Seed = Callable[[int | str], dict[str, Any]]
MARKER = "<!-- kernelband: problem=vector_add strategy=tiling -->"


def _seed_chain(factory: sessionmaker[Session], ids: dict[str, Any], job: str) -> str:
    """A failed first reply and its repair, as the scheduler records them; the repair's id."""
    job_id = row_id(factory, job)
    with session_scope(factory) as s:
        track = s.get_one(Track, ids["track"])
        broken = Candidate(track_id=track.id, parent_id=ids["original_row"], decision_id="d7",
                           strategy="tiling", editable="x", status="rejected",
                           reason="wrong_result", lineage_depth=1)
        s.add(broken)
        s.flush()
        fixed = Candidate(track_id=track.id, parent_id=ids["original_row"], decision_id="d7",
                          strategy="tiling", editable="y", status="measured", lineage_depth=1,
                          turn=1, repair_of=broken.id)
        s.add(fixed)
        s.flush()
        prompt = [{"role": "user", "content": f"{MARKER}\nmake it faster"}]
        s.add_all([
            Transcript(job_id=job_id, track_id=track.id, decision_id="d7", turn=0,
                       parent_id=ids["original_row"], candidate_id=broken.id, strategy="tiling",
                       model="m", messages=prompt, reply="```python\nx\n```"),
            Transcript(job_id=job_id, track_id=track.id, decision_id="d7", turn=1,
                       parent_id=ids["original_row"], candidate_id=fixed.id, strategy="tiling",
                       model="m", messages=[*prompt, {"role": "user", "content": "fix it"}],
                       reply="```python\ny\n```"),
        ])
        return public_id(s, "cand", fixed.id)


def test_candidate_transcript_shows_the_repair_chain(
        client: TestClient, auth: dict[str, str], job_body: Body, seed_results: Seed,
        factory: sessionmaker[Session]) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    fixed = _seed_chain(factory, seed_results(job_id), job_id)
    chain = client.get(f"/v1/jobs/{job_id}/candidates/{fixed}/transcript", headers=auth).json()
    assert [t["turn"] for t in chain["turns"]] == [0, 1]
    assert chain["turns"][1]["reply"].startswith("```python")
    candidate = client.get(f"/v1/jobs/{job_id}/candidates/{fixed}", headers=auth).json()
    assert candidate["turn"] == 1 and candidate["repair_of"] == chain["turns"][0]["candidate_id"]
    download = client.get(f"/v1/jobs/{job_id}/transcripts?download=true", headers=auth)
    assert download.status_code == 200 and "attachment" in download.headers["content-disposition"]
    assert len(download.json()["transcripts"]) == 2


def test_transcripts_of_another_team_look_missing(
        client: TestClient, auth: dict[str, str], job_body: Body,
        make_token: Callable[[str], str]) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    other = {"Authorization": f"Bearer {make_token('beta')}"}
    assert client.get(f"/v1/jobs/{job_id}/transcripts", headers=other).status_code == 404


def test_job_carries_repair_turns_and_dedupe(client: TestClient, auth: dict[str, str],
                                             job_body: Body) -> None:
    body = job_body(generator={"model": "openai/x", "repair_turns": 2, "dedupe": False})
    job = client.post("/v1/jobs", json=body, headers=auth).json()
    assert job["repair_turns"] == 2 and job["dedupe"] is False
    bad = client.post("/v1/jobs", json=job_body(generator={"repair_turns": 9}), headers=auth)
    assert bad.status_code == 422


def test_skill_library_is_per_team_and_can_be_switched_off_and_deleted(
        client: TestClient, auth: dict[str, str], make_token: Callable[[str], str],
        factory: sessionmaker[Session]) -> None:
    other = {"Authorization": f"Bearer {make_token('beta')}"}
    with session_scope(factory) as s:
        alpha = s.scalars(select(Team).where(Team.name == "alpha")).one()
        s.add_all([Skill(team_id=alpha.id, strategy="tiling", target="cpu", before="a",
                         after="b", speedup=1.2, label="estimated", description="d")
                   for _ in range(2)])
    library = client.get("/v1/skills", headers=auth).json()
    assert library["enabled"] is True and len(library["skills"]) == 2
    assert client.get("/v1/skills", headers=other).json()["skills"] == []
    first = library["skills"][0]["id"]
    assert client.delete(f"/v1/skills/{first}", headers=other).status_code == 404
    assert client.delete(f"/v1/skills/{first}", headers=auth).json() == {"deleted": 1}
    assert client.put("/v1/skills/settings", json={"enabled": False},
                      headers=auth).json() == {"enabled": False}
    assert client.get("/v1/skills", headers=auth).json()["enabled"] is False
    assert client.delete("/v1/skills", headers=auth).json() == {"deleted": 1}
    assert client.get("/v1/skills", headers=auth).json()["skills"] == []
