"""SQLAlchemy models of team webhooks: registered URLs and the log of their deliveries.

They build on `kernelband.db.base.Base` (one metadata); `kernelband.db.models` re-exports them.
Written by the API (hooks) and the webhook deliverer (deliveries, cursors), never the scheduler.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from kernelband.db.base import Base, utcnow


class Webhook(Base):
    """A team's URL told about job and suite completion (and optionally each new best)."""

    __tablename__ = "webhooks"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    # HMAC-SHA256 key of the X-KernelBand-Signature header; shown to the team once.
    secret: Mapped[str] = mapped_column(String(80))
    events: Mapped[list[Any]] = mapped_column(default=list)  # job.finished, suite.finished, job.new_best
    # The last events.id the deliverer has turned into deliveries for this hook; a new hook
    # starts at the newest event, so it is never told about the past.
    cursor_event_id: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class WebhookDelivery(Base):
    """One notification to one hook: retried with backoff until delivered or out of tries."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("webhook_id", "event_id", "kind", name="uq_webhook_deliveries_event"),
        Index("ix_webhook_deliveries_state_next", "state", "next_attempt_at"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    webhook_id: Mapped[int] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending | delivered | failed
    tries: Mapped[int] = mapped_column(Integer, default=0)
    last_status: Mapped[int | None] = mapped_column(Integer, default=None)
    last_error: Mapped[str | None] = mapped_column(Text, default=None)
    next_attempt_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(default=None)
