"""The candidate columns a task payload carries, held by the leader between passes.

Every pass built its attempts' payloads from one read of their candidates (source, parent's
source, static features, the newest measurement). Nearly all of them were written by this
leader a pass or two before: the child it inserted, the static profile it set, the
measurement it stored. Those writes note the facts here (`note_child`, `note_static_profile`,
`note_measurement`), a read notes what it found, and the payloads read only the candidates
nobody noted.

Facts noted in a transaction are seen by that transaction at once and by later ones only once
it commits (a rollback drops them), so what is held is what Postgres holds. They live in the
engine context (`HeldCandidates`): a new leader, or a restarted one, starts with none and reads.
A candidate's source and parent never change once it is inserted; its static features and
newest measurement change only through the writes above, which note the new value or, for a
candidate not held, nothing (it is read when asked for).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

_HELD = "kb_held_candidates"  # session.info: the engine context's HeldCandidates
_NOTED = "kb_noted_candidates"  # session.info: this transaction's notes, by candidate id
_LISTENING = "kb_candidate_facts_listening"
# Candidates held; past it the least recently noted go first (a source may be tens of KiB).
# A child's compile and profile payloads follow its insert within a few passes, so they are
# always held; a parent drawn from a large frontier may be read again.
MAX_HELD = 20_000


@dataclass(frozen=True)
class CandidateFacts:
    """What a payload reads of a candidate; `newest`: its newest measurement (anything with
    `label`, `method`, `time_ms` and `features`), None when it has none."""

    id: int
    editable: str
    parent_id: int | None
    parent_editable: str | None
    static_features: Any
    newest: Any = None


@dataclass
class HeldCandidates:
    """The committed facts one engine context holds, by candidate id."""

    facts: dict[int, CandidateFacts] = field(default_factory=dict)


def hold_candidates(session: Session, held: HeldCandidates) -> None:
    """Let this session's transactions read and note facts in `held` (committed ones only)."""
    session.info[_HELD] = held
    if not session.info.get(_LISTENING):  # once per session
        session.info[_LISTENING] = True
        event.listen(session, "after_commit", _publish)
        event.listen(session, "after_soft_rollback", _discard)


def known_facts(session: Session, ids: set[int]) -> dict[int, CandidateFacts]:
    """The facts of these candidates this transaction noted, else the committed ones held."""
    held: HeldCandidates | None = session.info.get(_HELD)
    if held is None:
        return {}
    noted: dict[int, CandidateFacts | None] = session.info.get(_NOTED, {})
    found: dict[int, CandidateFacts] = {}
    for candidate_id in ids:
        facts = noted[candidate_id] if candidate_id in noted else held.facts.get(candidate_id)
        if facts is not None:
            found[candidate_id] = facts
    return found


def note_facts(session: Session, facts: CandidateFacts) -> None:
    """What this transaction wrote or read of a candidate (held once it commits)."""
    if _HELD in session.info:
        session.info.setdefault(_NOTED, {})[facts.id] = facts


def note_child(session: Session, child: Any, parent_editable: str | None) -> None:
    """A child this transaction inserted (a `Candidate` with its id)."""
    note_facts(session, CandidateFacts(child.id, child.editable, child.parent_id,
                                       parent_editable, None))


def note_static_profile(session: Session, candidate_id: int, static_profile: Any) -> None:
    """A candidate's static profile was set: its static features are its "features" key."""
    features = static_profile.get("features") if isinstance(static_profile, dict) else None
    _change(session, candidate_id, static_features=features)


def note_measurement(session: Session, candidate_id: int, measurement: Any) -> None:
    """A measurement of the candidate was stored: it is now its newest."""
    _change(session, candidate_id, newest=measurement)


def _change(session: Session, candidate_id: int, **changes: Any) -> None:
    """Note a held candidate's changed facts; one not held stays unknown (read when asked)."""
    if _HELD not in session.info:
        return
    facts = known_facts(session, {candidate_id}).get(candidate_id)
    noted: dict[int, CandidateFacts | None] = session.info.setdefault(_NOTED, {})
    noted[candidate_id] = None if facts is None else replace(facts, **changes)


def _publish(session: Session) -> None:
    """after_commit: this transaction's notes hold from now on (None: forget a candidate)."""
    noted: dict[int, CandidateFacts | None] = session.info.pop(_NOTED, {})
    held: HeldCandidates | None = session.info.get(_HELD)
    if held is None or not noted:
        return
    for candidate_id, facts in noted.items():
        held.facts.pop(candidate_id, None)  # re-inserted last: dict order is least recent first
        if facts is not None:
            held.facts[candidate_id] = facts
    while len(held.facts) > MAX_HELD:
        held.facts.pop(next(iter(held.facts)))


def _discard(session: Session, _previous: Any) -> None:
    """after_soft_rollback: what was noted may or may not be committed later (a savepoint
    rolled back inside a transaction that goes on), so every candidate noted is forgotten."""
    noted: dict[int, CandidateFacts | None] = session.info.get(_NOTED, {})
    for candidate_id in noted:
        noted[candidate_id] = None


__all__ = ["MAX_HELD", "CandidateFacts", "HeldCandidates", "hold_candidates", "known_facts",
           "note_child", "note_facts", "note_measurement", "note_static_profile"]
