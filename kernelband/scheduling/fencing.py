"""Leader fencing: every scheduler write first checks that this scheduler still leads.

A scheduler that takes the leader lock bumps `leader_epoch.epoch` (`claim_leadership`); each of
its transactions then reads the epoch FOR SHARE (`verify_epoch`) and refuses to commit when a
newer leader took over, so a paused or partitioned old leader can never write again.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import LeaderEpoch, utcnow
from kernelband.scheduling.view_cache import EPOCH


class FencingError(RuntimeError):
    """This scheduler is no longer the leader; its transaction was rolled back."""


def claim_leadership(session: Session, holder: str) -> int:
    """Bump the leader epoch (call right after taking the advisory lock); returns the new one."""
    row = session.get(LeaderEpoch, 1, with_for_update=True)
    if row is None:
        row = LeaderEpoch(id=1, epoch=0, holder=holder)
        session.add(row)
    row.epoch += 1
    row.holder = holder
    row.updated_at = utcnow()
    session.flush()
    return row.epoch


def verify_epoch(session: Session, leader_epoch: int | None) -> None:
    """Refuse to write unless `leader_epoch` is still current; None means embedded (no fence)."""
    session.info[EPOCH] = leader_epoch  # what caches of this leader's writes belong to
    if leader_epoch is None:
        return
    current = session.execute(_CURRENT_EPOCH).scalar_one_or_none()
    if current != leader_epoch:
        raise FencingError(
            f"leader epoch is {current}, this scheduler holds {leader_epoch}: another scheduler "
            "took over; stop writing and wait for the lock again"
        )


# FOR SHARE holds the row until commit, so a new leader's bump waits for this transaction.
# Built once: every transaction of the leader runs it, and building and keying it for the
# statement cache cost more than the database took to answer it.
_CURRENT_EPOCH = select(LeaderEpoch.epoch).where(LeaderEpoch.id == 1).with_for_update(read=True)


__all__ = ["FencingError", "claim_leadership", "verify_epoch"]
