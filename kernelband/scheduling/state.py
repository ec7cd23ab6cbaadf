"""A track's policy state: loaded (from the cache or its rows), saved (appending the frontier).

The bandit policies are pure functions of a `PolicyState`; the scheduler keeps the state in
the track row (small fields, JSON) and the frontier as rows appended in order. The parsed
committed state of each track is cached per process (`state_cache`).

Write-back: a transaction's latest state of each track is written when it commits, unless
the session keeps states hot (`keep_states_hot`, the leader: `Settings.state_writeback_s`)
and the track's state was written less than that long ago; the state then lives in the
process's cache only. Every state written carries the job's last event number
(`EVENT_SEQ`); a state read from the rows is brought up to date by replaying the track's
`pull_selected` and `pull_finished` events after it (`replay`), so Postgres stays the truth.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session, defer, object_session
from sqlalchemy.orm.exc import StaleDataError

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.policy import Policy
from kernelband.db.json_rows import insert_rows
from kernelband.db.models import Candidate, FrontierRow, Job, Measurement, Track
from kernelband.scheduling.events import last_seq
from kernelband.scheduling.replay import replay_events
from kernelband.scheduling.state_cache import (
    cached_state,
    forget_state,
    note_write_back,
    remember_state,
    write_back_due,
)
from kernelband.scheduling.views import deferred_writes, refresh_view, touch_job

_TO_DIGITS = bytes.maketrans(bytes(range(10)), b"0123456789")
# A loader option for the scheduler's track reads: the stored policy state (kilobytes of JSON)
# is left unread, loaded on first access. `load_state` finds the parsed copy in the state cache
# by the row's version, so a running track's stored state is read again only after a takeover.
WITHOUT_STORED_STATE = defer(Track.policy_state)
# The job's last event number when the stored state was written: the events after it that
# belong to the track are what the stored state does not hold yet (`replay`).
EVENT_SEQ = "event_seq"
_WRITEBACK_S = "kb_state_writeback_s"
_SAVED = "kb_saved_states"
_FORCED = "kb_forced_states"


def keep_states_hot(session: Session, writeback_s: float) -> None:
    """This session's transactions write a track's state back at most every `writeback_s`
    (when it stops: at once); 0: with every commit that changed it."""
    session.info[_WRITEBACK_S] = writeback_s


def policy_for(job: Job) -> Policy:
    """The job's policy object (pure; configuration only, so jobs configured alike share one)."""
    return _policy(job.policy, json.dumps(job.policy_params or {}, sort_keys=True))


@lru_cache(maxsize=256)
def _policy(name: str, params: str) -> Policy:
    """Building a policy validates its parameters: once per configuration, not once per pass."""
    return make_policy(name, json.loads(params))


def load_state(track: Track, shared: bool = False) -> PolicyState:
    """The track's policy state: the parsed committed copy when cached, else its stored rows.

    `shared`: a cached state is returned as it is, not copied, for a caller that only reads it
    or hands it to a policy (`select` and `update` return new states and leave theirs as it
    was); changing it would change what later reads of the cache return."""
    session = object_session(track)
    cached = cached_state(session, track, copy=not shared) if session is not None else None
    if cached is not None:
        return cached
    if track.policy_state is None:
        raise RuntimeError(f"track {track.id} has no policy state yet (baseline not measured)")
    if session is None:
        raise RuntimeError(f"track {track.id} is detached: its frontier rows cannot be read")
    query = (select(FrontierRow.entry).where(FrontierRow.track_id == track.id)
             .order_by(FrontierRow.position).limit(track.frontier_size))  # rows 0..size-1
    stored = dict(track.policy_state)
    state = PolicyState.from_dict({**stored, "frontier": list(session.scalars(query))})
    if stored.get(EVENT_SEQ) is None:
        return state  # written with every change: nothing to replay
    policy = policy_for(session.get_one(Job, track.job_id))
    state, replayed = replay_events(session, track, state, int(stored[EVENT_SEQ]), policy,
                                    frontier_entry)
    if replayed:
        remember_state(session, track, state)  # cached as of this commit: no second replay
    return state


def save_state(session: Session, track: Track, state: PolicyState,
               previous: PolicyState | None = None, write_now: bool = False) -> None:
    """Keep the state as the track's latest and refresh the derived arm/cluster view unless
    `previous` shows it same; the transaction writes it back when it commits if due
    (`write_back`, module docstring), or `write_now`."""
    if len(state.frontier) < (track.frontier_size or 0):
        raise RuntimeError(f"track {track.id}: a policy state may only append to its frontier")
    _saved(session)[track.id] = (track, state)
    if write_now:
        _forced(session).add(track.id)
    remember_state(session, track, state)
    if previous is None or view_key(previous) != view_key(state):  # written at commit
        job = session.get_one(Job, track.job_id)
        deferred_writes(session).views[track.id] = (track, job, state)


def write_back(session: Session, tracks: Sequence[tuple[Track, PolicyState]]) -> None:
    """Write these states to their track rows now: the frontier entries past each stored size
    as new rows (one INSERT), the rest one small JSON value per track (labels packed,
    `stored_labels`) with its job's last event number (`EVENT_SEQ`), and the track's counters
    of pulls selected and finished, which the state counts (`next_decision`, `t`): a leader
    keeping states hot writes them with the state, not with every pull
    (`selection.hot_counters`). The job's version is bumped, so readers see the counters."""
    rows: list[dict[str, Any]] = []
    for track, state in tracks:
        stored = state.to_dict(frontier=False)
        stored["labels"] = stored_labels(state.labels)
        stored[EVENT_SEQ] = last_seq(session, track.job_id)  # may flush: columns set after it
        if track.iterations_dispatched != state.next_decision:
            track.iterations_dispatched = state.next_decision
        if track.iterations_done != state.t:
            track.iterations_done = state.t
        touch_job(session, track.job_id)
        size = track.frontier_size or 0
        rows += [{"track_id": track.id, "position": i, "entry": entry.to_dict()}
                 for i, entry in enumerate(state.frontier[size:], start=size)]
        track.policy_state = stored
        track.frontier_size = len(state.frontier)
        remember_state(session, track, state, stored)
        note_write_back(session, track.id, True)
    insert_rows(session.connection(), FrontierRow.__table__, rows)  # type: ignore[arg-type]


def _saved(session: Session) -> dict[int, tuple[Track, PolicyState]]:
    """The latest state of each track saved in the current transaction."""
    transaction = session.get_transaction() or session.begin()
    held = session.info.get(_SAVED)
    if held is None or held[0] is not transaction:
        held = session.info[_SAVED] = (transaction, {})
        if not event.contains(session, "before_commit", _write_back_saved):
            # first: the views' hook runs statements that flush; the state goes with that flush
            event.listen(session, "before_commit", _write_back_saved, insert=True)
    saved: dict[int, tuple[Track, PolicyState]] = held[1]
    return saved


def _forced(session: Session) -> set[int]:
    """Tracks whose state the current transaction writes back whatever the interval."""
    transaction = session.get_transaction() or session.begin()
    held = session.info.get(_FORCED)
    if held is None or held[0] is not transaction:
        held = session.info[_FORCED] = (transaction, set())
    forced: set[int] = held[1]
    return forced


def _write_back_saved(session: Session) -> None:
    """before_commit: each saved track's latest state is written back when due (always when
    states are not kept hot, when the track stops or was never written), else kept hot."""
    held = session.info.pop(_SAVED, None)
    if held is None or held[0] is not session.get_transaction():
        return
    saved: dict[int, tuple[Track, PolicyState]] = held[1]
    forced = session.info.pop(_FORCED, (None, set()))
    forced_ids = forced[1] if forced[0] is held[0] else set()
    interval = float(session.info.get(_WRITEBACK_S) or 0.0)
    due = []
    for track, state in saved.values():
        if (interval <= 0 or not track.frontier_size or track.status != "running"
                or track.id in forced_ids or write_back_due(session, track.id, interval)):
            due.append((track, state))
        else:
            note_write_back(session, track.id, False)
    if due:
        write_back(session, as_rows(session, due))


def as_rows(session: Session, saved: list[tuple[Track, PolicyState]]
            ) -> list[tuple[Track, PolicyState]]:
    """The saved states with their tracks as rows of this session: a track selection read as a
    value (`selection.track_value`) is loaded now, its stored state left unread (one read for
    all of them), and must still be the version its state was kept for."""
    values = {track.id: track for track, _ in saved if object_session(track) is None}
    if not values:
        return saved
    rows = {track.id: track for track in session.scalars(
        select(Track).where(Track.id.in_(sorted(values))).options(WITHOUT_STORED_STATE))}
    stale = sorted(i for i, value in values.items()
                   if i not in rows or rows[i].version != value.version)
    if stale:
        raise StaleDataError(f"tracks {stale} were changed by another writer since this "
                             "transaction read them; it is rolled back")
    for value in values.values():
        forget_state(session, value)  # kept for the row instead, as it is written
    return [(rows[track.id] if track.id in values else track, state) for track, state in saved]


def stored_labels(labels: list[int]) -> str | list[int]:
    """The cluster labels as stored: one digit per frontier entry while every label is 0-9.

    The track row is rewritten with every pull, and a list of 1,000s of labels was most of it;
    a digit string is a third of the size and one JSON scalar. `PolicyState.from_dict` reads
    both forms (`parse_labels`; a reader that takes int() of each item reads both alike).
    """
    if labels and (min(labels) < 0 or max(labels) > 9):
        return list(labels)
    return bytes(labels).translate(_TO_DIGITS).decode("ascii")  # encoded in C


def write_final_view(session: Session, track: Track) -> None:
    """A stopping track's arm/cluster view and its policy state go out with this transaction
    (views.VIEW_INTERVAL_S may have held back its latest rewards, and a state kept hot is
    written back once the track no longer runs)."""
    if not (track.frontier_size or track.id in _saved(session)):  # no baseline yet
        return
    state = load_state(track)
    _saved(session)[track.id] = (track, state)
    refresh_view(session, track, session.get_one(Job, track.job_id), state)


def view_key(state: PolicyState) -> tuple[Any, ...]:
    """Everything the arm/cluster view is derived from (selecting a pull changes none of it)."""
    # Frontier entries are only ever appended, so its length stands for its content.
    return (state.t, state.arm_n, state.arm_mu, state.labels, state.n_clusters,
            state.centroids, len(state.frontier))


def frontier_entry(candidate: Candidate, measurement: Measurement) -> FrontierEntry:
    """The bandit's view of a measured candidate."""
    features = measurement.features or {}
    h = features.get("h")
    return FrontierEntry(kernel_id=str(candidate.id), time_ms=measurement.time_ms,
                         phi=tuple(features.get("phi") or ()),
                         h=None if not h else (float(h[0]), float(h[1]), float(h[2])))


__all__ = ["EVENT_SEQ", "WITHOUT_STORED_STATE", "frontier_entry", "keep_states_hot", "load_state",
           "policy_for", "save_state", "stored_labels", "view_key", "write_back",
           "write_final_view"]
