"""Bringing a stored policy state up to date from the event log.

The leader keeps its tracks' states in memory and writes them back at intervals
(`state.write_back`); each stored state names the job's last event number then. Every change
of a track's state is a `pull_selected` (a `select`) or a `pull_finished` (an `update`) event
committed with it, so the stored state plus the track's later events, applied in order, is the
state the leader held: the RNG advances as it did, and pending decisions and rewards match.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.bandit import FrontierEntry, PolicyState
from kernelband.bandit.policy import Policy
from kernelband.bandit.types import Decision
from kernelband.db.models import Candidate, Event, Measurement, Track

EntryOf = Callable[[Candidate, Measurement], FrontierEntry]  # `state.frontier_entry`

log = logging.getLogger(__name__)

STATE_EVENTS = ("pull_selected", "pull_finished")


def replay_events(session: Session, track: Track, state: PolicyState, after_seq: int,
                  policy: Policy, entry_of: EntryOf) -> tuple[PolicyState, int]:
    """`state`, stored when the job's last event was `after_seq`, with the track's later pulls
    selected and finished applied in order by its job's `policy`; returns it and how many
    events were applied."""
    rows = session.execute(
        select(Event.kind, Event.payload)
        .where(Event.job_id == track.job_id, Event.seq > after_seq,
               Event.kind.in_(STATE_EVENTS))
        .order_by(Event.seq)).all()
    mine = [(kind, payload) for kind, payload in rows if payload.get("target") == track.target]
    if not mine:
        return state, 0
    measured = [int(p["candidate"]) for kind, p in mine
                if kind == "pull_finished" and p.get("outcome") == "measured"]
    entries = measured_entries(session, measured, entry_of)
    for kind, payload in mine:
        if kind == "pull_selected":
            decision, state = policy.select(state)
            state = keep_recorded(state, decision, Decision.from_dict(payload), track.id)
        else:
            child = entries.get(int(payload["candidate"])) if payload.get("candidate") else None
            entry = child if payload.get("outcome") == "measured" else None
            _, state = policy.update(state, str(payload["decision"]), entry)
    return state, len(mine)


def keep_recorded(state: PolicyState, replayed: Decision, recorded: Decision,
                  track_id: int) -> PolicyState:
    """The decision the log recorded stays pending (its attempts carry it), even should a
    replayed `select` choose otherwise (a policy changed between versions)."""
    if replayed == recorded:
        return state
    log.warning("track %s: replayed decision %s differs from the recorded %s; keeping the "
                "recorded one", track_id, replayed, recorded)
    state.pending.pop(replayed.decision_id, None)
    state.pending[recorded.decision_id] = recorded
    return state


def measured_entries(session: Session, candidate_ids: Sequence[int],
                     entry_of: EntryOf) -> dict[int, FrontierEntry]:
    """The frontier entry of each measured candidate, from its first measurement (the one its
    pull was rewarded with; later re-measurements do not change the frontier)."""
    if not candidate_ids:
        return {}
    rows = session.execute(
        select(Candidate, Measurement).join(Measurement, Measurement.candidate_id == Candidate.id)
        .where(Candidate.id.in_(sorted(set(candidate_ids)))).order_by(Measurement.id)).all()
    entries: dict[int, FrontierEntry] = {}
    for candidate, measurement in rows:
        entries.setdefault(candidate.id, entry_of(candidate, measurement))
    return entries


__all__ = ["STATE_EVENTS", "keep_recorded", "measured_entries", "replay_events"]
