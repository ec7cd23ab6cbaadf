"""Usage quotas at dispatch: teams that used up a daily quota get no new pulls.

Asked once per housekeeping interval (`pipeline.step`), not per pull: the answer is an
aggregate over the day's attempts and LLM usage (`kernelband.usage.teams_over_quota`). A
pull already selected still runs to its end; the team's jobs resume when the quota resets.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from kernelband.usage import teams_over_quota

log = logging.getLogger(__name__)


def teams_out_of_quota(session: Session, before: frozenset[int] = frozenset()) -> frozenset[int]:
    """The teams over a daily quota now; a team entering or leaving the set is logged. Should
    the usage read fail, the last answer stands: quotas must not stop the scheduler."""
    try:
        over = teams_over_quota(session)
    except (LookupError, ArithmeticError, TypeError, ValueError) as exc:
        log.error("usage quotas not read (%s: %s); keeping the last answer", type(exc).__name__,
                  exc)
        return before
    for team_id, breach in sorted(over.items()):
        if team_id not in before:
            log.warning("team %s gets no new pulls: %s", team_id, breach.message())
    for team_id in sorted(before - over.keys()):
        log.info("team %s is within its quotas again: its jobs get new pulls", team_id)
    return frozenset(over)


__all__ = ["teams_out_of_quota"]
