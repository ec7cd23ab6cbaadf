"""Job-wide budgets (tokens, cost, wall time) and the UTC reading of stored times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class BudgetFields(Protocol):
    """What `budget_reason` reads: a `Job`, or a row of these columns."""

    @property
    def budget_tokens(self) -> int | None: ...
    @property
    def tokens_used(self) -> int: ...
    @property
    def budget_usd(self) -> float | None: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def budget_wall_s(self) -> float | None: ...
    @property
    def started_at(self) -> datetime | None: ...


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; they were written as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def budget_reason(job: BudgetFields, now: datetime) -> str | None:
    """Which job-wide budget (tokens, usd, wall time) is spent, or None."""
    if job.budget_tokens is not None and job.tokens_used >= job.budget_tokens:
        return f"token budget spent ({job.tokens_used} >= {job.budget_tokens})"
    if job.budget_usd is not None and job.cost_usd >= job.budget_usd:
        return f"cost budget spent (${job.cost_usd:.4f} >= ${job.budget_usd:.4f})"
    if job.budget_wall_s is not None and job.started_at is not None:
        elapsed = (now - as_utc(job.started_at)).total_seconds()
        if elapsed >= job.budget_wall_s:
            return f"wall-time budget spent ({elapsed:.0f}s >= {job.budget_wall_s:.0f}s)"
    return None


__all__ = ["BudgetFields", "as_utc", "budget_reason"]
