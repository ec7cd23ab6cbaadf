"""The task bodies workers run, by kind: plain JSON dict in, a result value's `to_dict()` out.

They hold no database handle; everything arrives in the payload built by
`kernelband.scheduling.payloads.task_payloads`, and each answers with the value of its kind
(`kernelband.scheduling.results`: GenerateResult, CompileResult, ProfileResult, VerifyResult),
which the scheduler reads back with `results.read_result`. The bodies live in two modules so
that a worker loads only what its kind needs (`dispatch.task_function`): `generate_task` (the
generator) and `candidate_tasks` (compile, profile, verify: the sandboxed checks and the
measurement). This module gathers all four for callers that run any kind in one process.
Every body runs its sandboxed work under the job's own limits (`limits` in the payload;
`task_payload.under_job_limits`).
"""

from __future__ import annotations

from kernelband.scheduling.candidate_tasks import compile, profile, verify
from kernelband.scheduling.generate_task import generate, generator

_generator = generator  # the per-process generator cache, cleared by tests and benchmarks

__all__ = ["compile", "generate", "generator", "profile", "verify"]
