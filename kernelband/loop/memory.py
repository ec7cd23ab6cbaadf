"""Lineage memory for the prompt: the parent's ancestry with speedups, and the last attempts on
this (parent, strategy) with their outcomes, so the model does not repeat itself."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Track, Transcript
from kernelband.db.repository import latest_measurements

MAX_LINEAGE = 8
MAX_RECENT = 5


def _speedup(track: Track, time_ms: float | None, label: str) -> str:
    if time_ms is None or not track.original_time_ms or time_ms <= 0:
        return "not measured"
    return f"{track.original_time_ms / time_ms:.3f}x ({label})"


def lineage_lines(session: Session, track: Track, parent: Candidate) -> list[str]:
    """From the original kernel to the parent: strategy and speedup of each step."""
    chain: list[Candidate] = []
    node: Candidate | None = parent
    while node is not None and len(chain) < MAX_LINEAGE:
        chain.append(node)
        node = session.get(Candidate, node.parent_id) if node.parent_id else None
    newest = latest_measurements(session, [c.id for c in chain])
    lines = []
    for c in reversed(chain):
        m = newest.get(c.id)
        what = "original kernel" if c.parent_id is None else f"#{c.id} ({c.strategy or 'free'})"
        speed = _speedup(track, m.time_ms if m else None, m.label if m else "")
        lines.append(f"lineage: {what}, speedup {speed}")
    return lines


def outcome_text(session: Session, track: Track, c: Candidate) -> str:
    """A child's outcome in words; held-out failures say no more than that they happened."""
    if c.status == "measured":
        m = latest_measurements(session, [c.id]).get(c.id)
        return "correct, speedup " + _speedup(track, m.time_ms if m else None, m.label if m else "")
    if c.status == "duplicate":
        return f"identical to #{c.duplicate_of}, not evaluated again"
    if c.status == "rejected" and (c.reason or "").startswith("held_out:"):
        return "rejected on cases not shown to you"
    if c.status == "rejected":
        return f"rejected: {(c.reason or 'rejected')[:160]}"
    return "still being evaluated"


def recent_lines(session: Session, track: Track, parent: Candidate,
                 strategy: str | None) -> list[str]:
    """The last attempts on (parent, strategy): children and replies without usable code."""
    same = (Candidate.strategy == strategy) if strategy else Candidate.strategy.is_(None)
    children = session.scalars(select(Candidate).where(
        Candidate.track_id == track.id, Candidate.parent_id == parent.id, same)
        .order_by(Candidate.id.desc()).limit(MAX_RECENT)).all()
    lines = [f"earlier attempt #{c.id}: {outcome_text(session, track, c)}" for c in children]
    same_turn = (Transcript.strategy == strategy) if strategy else Transcript.strategy.is_(None)
    failed = session.scalars(select(Transcript.outcome).where(
        Transcript.track_id == track.id, Transcript.parent_id == parent.id, same_turn,
        Transcript.candidate_id.is_(None))
        .order_by(Transcript.id.desc()).limit(MAX_RECENT)).all()
    lines += [f"earlier reply without usable code: {reason}" for reason in failed if reason]
    return lines[:MAX_RECENT]


def memory_lines(session: Session, track: Track, parent: Candidate,
                 strategy: str | None) -> list[str]:
    """Every memory line of a first-turn prompt."""
    return lineage_lines(session, track, parent) + recent_lines(session, track, parent, strategy)
