"""A track's policy state: loaded (from the cache or its rows), saved (appending the frontier).

The bandit policies are pure functions of a `PolicyState`; the scheduler keeps the state in
the track row (small fields, JSON) and the frontier as rows appended in order. The parsed
committed state of each track is cached per process (`state_cache`).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, defer, object_session

from kernelband.bandit import FrontierEntry, PolicyState, make_policy
from kernelband.bandit.policy import Policy
from kernelband.db.models import Candidate, FrontierRow, Job, Measurement, Track
from kernelband.db.row_buffer import add_row
from kernelband.scheduling.state_cache import cached_state, remember_state
from kernelband.scheduling.views import deferred_writes, refresh_view

_TO_DIGITS = bytes.maketrans(bytes(range(10)), b"0123456789")
# A loader option for the scheduler's track reads: the stored policy state (kilobytes of JSON)
# is left unread, loaded on first access. `load_state` finds the parsed copy in the state cache
# by the row's version, so a running track's stored state is read again only after a takeover.
WITHOUT_STORED_STATE = defer(Track.policy_state)


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
    return PolicyState.from_dict({**track.policy_state, "frontier": list(session.scalars(query))})


def save_state(session: Session, track: Track, state: PolicyState,
               previous: PolicyState | None = None) -> None:
    """Store the state and refresh the derived arm/cluster view unless `previous` shows it same.

    The frontier only ever grows at its end, so only entries past the stored size are written;
    the rest of the state is one small JSON value (its labels packed, `stored_labels`).
    """
    stored = state.to_dict(frontier=False)
    stored["labels"] = stored_labels(state.labels)
    size = track.frontier_size or 0
    if len(state.frontier) < size:
        raise RuntimeError(f"track {track.id}: a policy state may only append to its frontier")
    for i, entry in enumerate(state.frontier[size:], start=size):  # one INSERT per transaction
        add_row(session, FrontierRow,
                {"track_id": track.id, "position": i, "entry": entry.to_dict()})
    track.policy_state = stored
    track.frontier_size = len(state.frontier)
    remember_state(session, track, state, stored)
    if previous is None or view_key(previous) != view_key(state):  # written at commit
        job = session.get_one(Job, track.job_id)
        deferred_writes(session).views[track.id] = (track, job, state)


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
    """A stopping track's arm/cluster view goes out with this transaction (views.VIEW_INTERVAL_S
    may have held back its latest rewards)."""
    if track.policy_state is not None:  # a track without a baseline has no view
        refresh_view(session, track, session.get_one(Job, track.job_id), load_state(track))


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


__all__ = ["WITHOUT_STORED_STATE", "frontier_entry", "load_state", "policy_for", "save_state", "stored_labels",
           "view_key", "write_final_view"]
