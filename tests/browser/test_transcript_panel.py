"""The job page shows a candidate's transcript beside the diff: the generation turn and the
repair turn that fixed it, prompt and reply, as a kernel engineer reads them."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository, session_scope
from kernelband.db.models import Candidate, Event, Measurement, Track, Transcript
from tests.browser.conftest import LiveServer, shot
from tests.utils.public_ids import public_id

MARKER = "<!-- kernelband: problem=seeded_repair strategy=tiling -->"
FIX_REPLY = "Fixed the mask.\n```python\n@triton.jit\ndef kernel(x_ptr):\n    pass  # repaired\n```"


def seed_repaired_job(factory: sessionmaker[Session], team: str) -> tuple[int, int]:
    """A finished job whose one pull failed, then was repaired (as the scheduler writes it)."""
    with session_scope(factory) as s:
        owner = repository.get_or_create_team(s, team)
        problem = repository.get_or_create_problem(s, owner.id, "seeded_repair", "native",
                                                   "# seeded", {"editable": "x"}, "seedrepair")
        job = repository.create_job(s, owner.id, problem.id, ("cpu",), status="completed",
                                    budget_iterations=1, generator="llm", model="openai/m")
        track = Track(job_id=job.id, target="cpu", status="completed", iterations_done=1,
                      iterations_dispatched=1, original_time_ms=1.0)
        s.add(track)
        s.flush()
        original = Candidate(track_id=track.id, editable="x", status="measured")
        s.add(original)
        s.flush()
        broken = Candidate(track_id=track.id, parent_id=original.id, decision_id="d0",
                           strategy="tiling", editable="y", status="rejected",
                           reason="wrong_result", lineage_depth=1)
        s.add(broken)
        s.flush()
        fixed = Candidate(track_id=track.id, parent_id=original.id, decision_id="d0",
                          strategy="tiling", editable="z", status="measured", lineage_depth=1,
                          turn=1, repair_of=broken.id)
        s.add(fixed)
        s.flush()
        s.add(Measurement(candidate_id=fixed.id, label="estimated", method="cost_model",
                          device="cost model", target="cpu", time_ms=0.8))
        prompt = [{"role": "system", "content": "You are an expert."},
                  {"role": "user", "content": f"{MARKER}\nRewrite the kernel."}]
        s.add_all([
            Transcript(job_id=job.id, track_id=track.id, decision_id="d0", turn=0,
                       candidate_id=broken.id, strategy="tiling", model="openai/m",
                       messages=prompt, reply="```python\nbroken\n```", prompt_tokens=40,
                       completion_tokens=10),
            Transcript(job_id=job.id, track_id=track.id, decision_id="d0", turn=1,
                       candidate_id=fixed.id, strategy="tiling", model="openai/m",
                       messages=[*prompt, {"role": "user", "content": "reason: wrong_result"}],
                       reply=FIX_REPLY, prompt_tokens=60, completion_tokens=12),
            Event(job_id=job.id, seq=1, kind="pull_finished", payload={}),
        ])
        track.original_candidate_id, track.best_candidate_id = original.id, fixed.id
        track.best_time_ms, track.best_speedup, track.best_label = 0.8, 1.25, "estimated"
        return job.id, fixed.id


def test_transcript_appears_beside_the_candidate(page: Any, live_server: LiveServer) -> None:
    job_id, fixed = seed_repaired_job(live_server.factory, "alpha")
    page.goto(f"{live_server.url}/ui/jobs/{public_id(live_server.factory, 'job', job_id)}")
    row = f"#candidates-table tr[data-candidate='{public_id(live_server.factory, 'cand', fixed)}']"
    page.wait_for_selector(row)
    assert "repair turn 1" in page.inner_text(row)
    page.click(f"{row} button.transcript-candidate")
    page.wait_for_selector("#transcript-panel .turn[data-turn='1']")
    panel = page.inner_text("#transcript-panel")
    assert "generation" in panel and "repair turn 1" in panel and "# repaired" in panel
    assert page.locator("#transcript-panel .turn").count() == 2
    assert page.locator("#diff-panel").is_visible()  # the diff stays beside it
    shot(page, "job-transcript")
