"""A task payload as a worker reads it: its problem, the candidate, and the job's limits.

The scheduler builds payloads (`kernelband.scheduling.payloads.task_payloads`); the task bodies
(`generate_task`, `candidate_tasks`) read them with these functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from kernelband.problem.model import KernelProblem
from kernelband.sandbox import job_limits

R = TypeVar("R")


def under_job_limits(body: Callable[[dict[str, Any]], R]) -> Callable[[dict[str, Any]], R]:
    """Run `body` with the payload's job limits (`limits`: run_s, compile_s, config_compile_s)
    applied to every sandbox run it starts (the node's settings otherwise), and the job's own
    Triton cache."""
    @functools.wraps(body)
    def run(payload: dict[str, Any]) -> R:
        with job_limits(payload.get("limits"), payload.get("job_id")):
            return body(payload)

    return run


def problem_of(payload: dict[str, Any]) -> KernelProblem:
    return KernelProblem.from_dict(payload["problem"])


def editable_of(payload: dict[str, Any]) -> str | None:
    """None for the original kernel: it is checked as submitted, without candidate rules."""
    return None if payload.get("original") else payload["editable"]


__all__ = ["editable_of", "problem_of", "under_job_limits"]
