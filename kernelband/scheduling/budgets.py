"""Job-wide budgets (tokens, cost, wall time) and the UTC reading of stored times."""

from __future__ import annotations

from datetime import UTC, datetime

from kernelband.db.models import Job


def as_utc(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; they were written as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def budget_reason(job: Job, now: datetime) -> str | None:
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


__all__ = ["as_utc", "budget_reason"]
