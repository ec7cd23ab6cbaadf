"""Seeds a large finished job straight into the database with the repository functions, as the
scheduler would have written it (synthetic numbers, labelled estimated; used for render timing)."""

from __future__ import annotations

import random

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository, session_scope
from kernelband.db.models import ArmStat, Candidate, Event, Measurement, Track

TARGETS = ("cpu", "rtx4090", "a100", "h100", "h200")
STRATEGIES = ("tiling", "vectorization", "pipeline", "fusion", "reordering", "access_layout")
REGION = "@triton.jit\ndef kernel(x_ptr, n, BLOCK: tl.constexpr):\n    pass  # variant {i}\n"


def seed_large_job(factory: sessionmaker[Session], team: str, candidates: int = 200) -> int:
    """A completed job with 5 tracks and `candidates` children spread over them; returns its id."""
    rng = random.Random(7)
    with session_scope(factory) as s:
        owner = repository.get_or_create_team(s, team)
        problem = repository.get_or_create_problem(
            s, owner.id, "seeded_large", "native", "# seeded", {"editable": REGION}, f"seed{candidates}")
        job = repository.create_job(s, owner.id, problem.id, TARGETS, status="completed",
                                    budget_iterations=candidates // len(TARGETS))
        for target in TARGETS:
            _seed_track(s, job.id, target, candidates // len(TARGETS), rng)
        s.add_all([Event(job_id=job.id, seq=i + 1, kind="pull_finished", payload={})
                   for i in range(candidates)])
        return job.id


def _seed_track(s: Session, job_id: int, target: str, n: int, rng: random.Random) -> None:
    track = Track(job_id=job_id, target=target, status="completed", iterations_done=n,
                  iterations_dispatched=n, original_time_ms=1.0, held_out="passed")
    s.add(track)
    s.flush()
    original = Candidate(track_id=track.id, editable=REGION.format(i=0), status="measured")
    s.add(original)
    s.flush()
    best_time, best_id = 1.0, original.id
    for i in range(n):
        status = "measured" if rng.random() < 0.8 else "rejected"
        child = Candidate(track_id=track.id, parent_id=original.id, lineage_depth=1,
                          strategy=rng.choice(STRATEGIES), editable=REGION.format(i=i + 1),
                          status=status, reason=None if status == "measured" else "timeout")
        s.add(child)
        s.flush()
        if status == "measured":
            t = rng.uniform(0.4, 1.3)
            s.add(Measurement(candidate_id=child.id, label="estimated", method="cost_model",
                              device="cost model", target=target, time_ms=t))
            if t < best_time:
                best_time, best_id = t, child.id
    track.original_candidate_id, track.best_candidate_id = original.id, best_id
    track.best_time_ms, track.best_speedup, track.best_label = best_time, 1.0 / best_time, "estimated"
    s.add_all([ArmStat(track_id=track.id, cluster=c, strategy=st, pulls=rng.randint(1, 9),
                       mean_reward=rng.random(), masked=rng.random() < 0.2, ucb_score=rng.random() + 1)
               for c in range(2) for st in STRATEGIES])


def append_measured_child(factory: sessionmaker[Session], job_id: int, target: str = "cpu") -> int:
    """One more measured child and an event announcing it, as a running scheduler would add."""
    with session_scope(factory) as s:
        track = s.scalars(select(Track).where(Track.job_id == job_id, Track.target == target)).one()
        child = Candidate(track_id=track.id, parent_id=track.original_candidate_id, lineage_depth=1,
                          strategy="tiling", editable=REGION.format(i=999), status="measured")
        s.add(child)
        s.flush()
        s.add(Measurement(candidate_id=child.id, label="estimated", method="cost_model",
                          device="cost model", target=target, time_ms=0.3))
        last = s.scalar(select(func.max(Event.seq)).where(Event.job_id == job_id)) or 0
        s.add(Event(job_id=job_id, seq=last + 1, kind="pull_finished",
                    payload={"target": target, "candidate": child.id}))
        return child.id


def seed_paired_job(factory: sessionmaker[Session], team: str) -> int:
    """A finished h200 job whose children carry paired speedups (one significant, one whose
    interval contains 1.0) and one measured before pairing existed (no speedup)."""
    paired = {"speedup_rounds": 24, "speedup_method": "ABBA rounds; 95% BCa bootstrap",
              "speedup_baseline": "original"}
    with session_scope(factory) as s:
        owner = repository.get_or_create_team(s, team)
        problem = repository.get_or_create_problem(
            s, owner.id, "seeded_paired", "native", "# seeded", {"editable": REGION}, "paired1")
        job = repository.create_job(s, owner.id, problem.id, ("h200",), status="completed",
                                    budget_iterations=3)
        track = Track(job_id=job.id, target="h200", status="completed", iterations_done=3,
                      iterations_dispatched=3, original_time_ms=1.0, held_out="passed")
        s.add(track)
        s.flush()
        original = Candidate(track_id=track.id, editable=REGION.format(i=0), status="measured")
        s.add(original)
        s.flush()
        children = [Candidate(track_id=track.id, parent_id=original.id, lineage_depth=1,
                              strategy=st, editable=REGION.format(i=i + 1), status="measured")
                    for i, st in enumerate(("tiling", "pipeline", "fusion"))]
        s.add_all(children)
        s.flush()
        rows = ((original, 1.0, {}), (children[0], 0.85, {"speedup": 1.18, "speedup_low": 1.12,
                                                          "speedup_high": 1.24, **paired}),
                (children[1], 0.99, {"speedup": 1.01, "speedup_low": 0.97, "speedup_high": 1.05,
                                     **paired}),
                (children[2], 0.2, {}))  # unpaired: its 5x ratio is never shown
        s.add_all([Measurement(candidate_id=c.id, label="measured", method="paired A/B",
                               device="NVIDIA H200", target="h200", time_ms=t, **extra)
                   for c, t, extra in rows])
        track.original_candidate_id, track.best_candidate_id = original.id, children[0].id
        track.best_time_ms, track.best_speedup, track.best_label = 0.85, 1.18, "measured"
        track.best_speedup_low, track.best_speedup_high = 1.12, 1.24
        track.best_speedup_method = paired["speedup_method"]
        track.best_speedup_final = True
        s.add(Event(job_id=job.id, seq=1, kind="job_finished", payload={}))
        return job.id
