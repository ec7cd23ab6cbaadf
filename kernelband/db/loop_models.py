"""SQLAlchemy models of the generation loop: turn transcripts and the team skill library.

They build on `kernelband.db.base.Base` (one metadata); `kernelband.db.models` re-exports them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from kernelband.db.base import Base, utcnow


class Transcript(Base):
    """The prompt and reply of one generation or repair turn (secrets scrubbed)."""

    __tablename__ = "transcripts"
    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    track_id: Mapped[int] = mapped_column(ForeignKey("tracks.id", ondelete="CASCADE"))
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"), default=None
    )
    decision_id: Mapped[str | None] = mapped_column(String(40), default=None)
    parent_id: Mapped[int | None] = mapped_column(Integer, default=None)
    candidate_id: Mapped[int | None] = mapped_column(Integer, default=None, index=True)
    turn: Mapped[int] = mapped_column(Integer, default=0)  # 0: generation, 1..R: repairs
    strategy: Mapped[str | None] = mapped_column(String(40), default=None)
    model: Mapped[str] = mapped_column(String(200), default="")
    messages: Mapped[list[Any]] = mapped_column(default=list)  # [{role, content}] sent
    reply: Mapped[str] = mapped_column(Text, default="")
    outcome: Mapped[str | None] = mapped_column(Text, default=None)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Skill(Base):
    """A verified improvement in a team's skill library (a one-shot example for later jobs)."""

    __tablename__ = "skills"
    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), default=None
    )
    candidate_id: Mapped[int | None] = mapped_column(Integer, default=None)
    problem_name: Mapped[str] = mapped_column(String(200), default="")
    strategy: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text, default="")
    before: Mapped[str] = mapped_column(Text)
    after: Mapped[str] = mapped_column(Text)
    speedup: Mapped[float] = mapped_column(Float)
    label: Mapped[str] = mapped_column(String(16))  # measured | estimated
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
