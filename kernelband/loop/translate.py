"""Translate steps in the scheduler (a KernelBench file as published, problem/translate.py).

The track's original candidate is a placeholder: the PyTorch Model itself. A pull whose parent
is that placeholder is a `translate` step while the track has no translated kernel yet (its
first pull, and every pull after a failed translation: a track without a Triton ModelNew cannot
optimize). Once a translation was measured, a pull the policy aims at the placeholder optimizes
the track's best translation instead. The placeholder is never credited as a kernel: the first
correct translation becomes the track's best even when slower than PyTorch (KernelBench counts
a correct, slower kernel as correct with its speedup below 1), and a track that never got one
ends with held_out "untranslated", which suites count as not correct.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Problem, Track
from kernelband.loop.memory import MAX_RECENT, outcome_text
from kernelband.problem.translate import TRANSLATE_STEP
from kernelband.scheduling.attempts import new_attempt

UNTRANSLATED = "untranslated"


_CACHE = "kb_needs_translation"


def needs_translation(session: Session, job: Job) -> bool:
    """True for a job on a KernelBench file as published.

    Only an LLM job can hold one (submissions without a model are refused), so the rules
    generator's jobs never ask the database; the flag of a problem is read once per session.
    """
    if job.generator != "llm" or not job.model:
        return False
    known: dict[int, bool] = session.info.setdefault(_CACHE, {})
    if job.problem_id not in known:
        flag = Problem.loaded["needs_translation"].as_boolean()
        found = session.scalar(select(flag).where(Problem.id == job.problem_id))
        known[job.problem_id] = bool(found)
    return known[job.problem_id]


def pull_parent(session: Session, job: Job, track: Track,
                parent_id: int) -> tuple[int, dict[str, str]]:
    """(parent, step keys) of a pull the policy aimed at `parent_id`."""
    placeholder = track.original_candidate_id
    if parent_id != placeholder or not needs_translation(session, job):
        return parent_id, {}
    if track.best_candidate_id is not None and track.best_candidate_id != placeholder:
        return track.best_candidate_id, {}
    return parent_id, {"step": TRANSLATE_STEP}


def new_pull(session: Session, job: Job, track: Track, decision: Any,
             ref: dict[str, Any]) -> dict[str, str]:
    """The pending generate attempt of a selected pull; returns its step keys (for the event)."""
    parent, step = pull_parent(session, job, track, int(decision.parent_id))
    new_attempt(session, track, "generate", parent, decision.decision_id, {**ref, **step})
    return step


def replaces_best(session: Session, job: Job, track: Track, time_ms: float) -> bool:
    """A measured child becomes the best: it is faster, or it replaces the PyTorch placeholder."""
    if track.best_time_ms is None or time_ms < track.best_time_ms:
        return True
    return track.best_candidate_id == track.original_candidate_id and needs_translation(session, job)


def kept_original(session: Session, job: Job, why: str) -> tuple[str, str]:
    """(held_out, reason) of a track whose best stayed its original candidate."""
    if needs_translation(session, job):
        return UNTRANSLATED, "no Triton translation of Model passed its checks"
    return "original", why


def translate_memory(session: Session, track: Track, parent: Candidate) -> list[str]:
    """The track's earlier translations (any strategy) and their outcomes, newest first."""
    children = session.scalars(select(Candidate).where(
        Candidate.track_id == track.id, Candidate.parent_id == parent.id)
        .order_by(Candidate.id.desc()).limit(MAX_RECENT)).all()
    return [f"earlier translation #{c.id}: {outcome_text(session, track, c)}" for c in children]
