"""Rows a scheduler transaction writes just before it commits, each table in one statement.

The arm/cluster views the dashboard reads (derived from the policy state, never read back)
and the `version` of every job the transaction appended events to (the API's ETags); new
frontier entries are buffered rows (`db.row_buffer`). Collected while results and pulls are
applied, written by one `before_commit` hook, so a batch of results costs one statement per
table, not per result.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

import numpy as np
from sqlalchemy import Table, bindparam, update
from sqlalchemy import event as orm_events
from sqlalchemy.orm import Session

from kernelband.bandit import PolicyState, make_policy
from kernelband.bandit.arms import ucb_scores
from kernelband.bandit.frontier_index import ClusterIndex, cluster_index, fastest, open_mask
from kernelband.bandit.strategies import STRATEGY_NAMES
from kernelband.db.models import ArmStat, Cluster, Job, Track, utcnow
from kernelband.db.upsert import upsert_rows
from kernelband.scheduling.view_cache import changed_rows, note_view_written, view_due


@dataclass
class DeferredWrites:
    """Rows one transaction writes just before it commits, each table in one statement."""

    touched_jobs: set[int] = field(default_factory=set)  # their `version` is bumped
    # The latest state per track, with its job (held here: the identity map holds rows weakly).
    views: dict[int, tuple[Track, Job, PolicyState]] = field(default_factory=dict)
    forced: set[int] = field(default_factory=set)  # tracks whose view is written however recent


_DEFERRED = "kb_deferred_writes"
_JOBS = cast(Table, Job.__table__)
# Core, built once: the ORM's bulk update machinery and building the statement per commit cost
# more than the UPDATE itself.
_BUMP_JOBS = (update(_JOBS).where(_JOBS.c.id.in_(bindparam("ids", expanding=True)))
              .values(version=_JOBS.c.version + 1))
UCB_DECIMALS = 4  # stored precision of an arm's UCB score
# A running track's arm/cluster view is rewritten with a reward at most once per interval (each
# reward changes every arm's UCB score through ln t, so each rewrite touches every arm row). A
# reward inside the interval shows with the track's next reward after it, when the track stops
# (`refresh_view`), or at once after a takeover (a new leader remembers no writes).
VIEW_INTERVAL_S = 5.0
# A running track's cluster rows (every frontier member's id, by cluster) at most this often:
# each measured child changes a cluster's members, so each rewrite sent the whole frontier's
# ids (a cost per rewrite that grows with the frontier, a third of what a pull came to cost
# more at 1,400 entries than at 1,000); sizes and members lag by up to this much while it runs.
CLUSTER_INTERVAL_S = 30.0


def deferred_writes(session: Session) -> DeferredWrites:
    """The current transaction's deferred writes (written by `_write_deferred` at commit)."""
    transaction = session.get_transaction()
    held = session.info.get(_DEFERRED)
    if held is None or held[0] is not transaction:
        held = session.info[_DEFERRED] = (transaction, DeferredWrites())
        if not orm_events.contains(session, "before_commit", _write_deferred):
            orm_events.listen(session, "before_commit", _write_deferred)
    writes: DeferredWrites = held[1]
    return writes


def refresh_view(session: Session, track: Track, job: Job, state: PolicyState) -> None:
    """Write the track's arm/cluster view with this transaction, however recent the last one."""
    writes = deferred_writes(session)
    writes.views[track.id] = (track, job, state)
    writes.forced.add(track.id)


def touch_job(session: Session, job_id: int) -> None:
    """Bump the job's `version` when this transaction commits (once, however many events)."""
    deferred_writes(session).touched_jobs.add(job_id)


def _write_deferred(session: Session) -> None:
    """before_commit: new frontier rows, the arm/cluster views and job versions, batched."""
    held = session.info.pop(_DEFERRED, None)
    if held is None or held[0] is not session.get_transaction():
        return
    writes: DeferredWrites = held[1]
    arms: list[dict[str, Any]] = []
    clusters: list[dict[str, Any]] = []
    now = utcnow()
    for track, job, state in writes.views.values():
        final = track.id in writes.forced or track.status != "running"
        if not (final or view_due(session, track.id, VIEW_INTERVAL_S)):
            continue  # written again within VIEW_INTERVAL_S, or when the track stops
        note_view_written(session, track.id)
        arms += arm_rows(job, track, state, now)
        if final or view_due(session, track.id, CLUSTER_INTERVAL_S, "clusters"):
            note_view_written(session, track.id, "clusters")
            clusters += cluster_rows(track, state, now)
    for model, rows, keys, compared, carried in (
            (ArmStat, arms, ("track_id", "cluster", "strategy"),
             ("pulls", "mean_reward", "masked"), ("ucb_score",)),
            (Cluster, clusters, ("track_id", "cluster"),
             ("members", "size", "representative_id", "centroid"), ())):
        rows = changed_rows(session, model.__tablename__, rows, keys, compared)
        upsert_rows(session, model, rows, keys, compared, touched="updated_at", carried=carried)
    if writes.touched_jobs:
        session.connection().execute(_BUMP_JOBS, {"ids": sorted(writes.touched_jobs)})


def arm_rows(job: Job, track: Track, state: PolicyState, now: datetime) -> list[dict[str, Any]]:
    """Arm statistics as rows, for the dashboard (derived, never read back).

    Upserted, so rows whose values did not change keep their `updated_at` ("last changed"). An
    arm's UCB score is written with a change of its pulls, mean or mask, as it was then: every
    reward moves every arm's score a little (ln t), and rewriting all of a track's arms for
    that made the view most of what a result cost to apply.
    """
    config = _policy_config(job.policy, json.dumps(job.policy_params or {}, sort_keys=True))
    ucb = _ucb_or_none(state, float(getattr(config, "c", 2.0)))
    theta = getattr(config, "theta_sat", None)
    open_mask = _open_mask(state, theta) if theta is not None else None
    return [{"track_id": track.id, "cluster": cluster,
             "strategy": STRATEGY_NAMES[index] if index < len(STRATEGY_NAMES) else f"arm{index}",
             "pulls": float(pulls), "mean_reward": float(state.arm_mu[cluster][index]),
             "ucb_score": None if ucb is None else ucb[cluster][index],
             "masked": open_mask is not None and not open_mask[cluster][index],
             "updated_at": now}
            for cluster, row in enumerate(state.arm_n) for index, pulls in enumerate(row)]


@lru_cache(maxsize=256)
def _policy_config(name: str, params: str) -> Any:
    """A policy's configuration: validated once per configuration, not once per view write."""
    return make_policy(name, json.loads(params)).config


def _ucb_or_none(state: PolicyState, c: float) -> list[list[float]] | None:
    try:
        scores = ucb_scores(state, c, False)
    except Exception:  # a policy with another arm layout: the view just omits the score
        return None
    # Rounded: the view shows 3 decimals, and an unrounded score changes with every reward
    # (ln t), so every arm row would be rewritten each time.
    return [[round(float(v), UCB_DECIMALS) if math.isfinite(float(v)) else 0.0 for v in row]
            for row in scores]


def _open_mask(state: PolicyState, theta: Any) -> list[list[bool]]:
    """The saturation mask per arm of a masking (KernelBand) policy, with the job's theta
    (from the state's frontier index, as the policy computes it)."""
    mask = open_mask(_index(state), np.array(theta, dtype=float))
    return [[bool(v) for v in row] for row in mask]


def _index(state: PolicyState) -> ClusterIndex:
    """The state's frontier index with a row per arm-table cluster (the policy's own K, so
    the index the policy keeps between pulls is reused, not rebuilt)."""
    return cluster_index(state, max(len(state.arm_n), max(state.labels, default=0) + 1, 1))


def cluster_rows(track: Track, state: PolicyState, now: datetime) -> list[dict[str, Any]]:
    """One row per cluster: members, size, fastest member (representative) and centroid.

    Members and times come from the state's frontier index (`frontier_index.cluster_index`,
    kept between pulls), not from a loop over every entry."""
    index = _index(state)
    entries = index.frontier.entries
    rows = []
    for cluster in range(max(state.n_clusters, 1)):
        members: list[int] = (index.members[cluster].tolist() if cluster < len(index.members)
                              else [])
        best = fastest(index, cluster) if members else None  # the first on ties
        rows.append({"track_id": track.id, "cluster": cluster,
                     "members": [entries[i].kernel_id for i in members], "size": len(members),
                     "representative_id": None if best is None else int(entries[best].kernel_id),
                     "centroid": state.centroids[cluster] if cluster < len(state.centroids)
                     else [], "updated_at": now})
    return rows


__all__ = ["CLUSTER_INTERVAL_S", "VIEW_INTERVAL_S", "DeferredWrites", "arm_rows", "cluster_rows",
           "deferred_writes", "refresh_view", "touch_job"]
