"""A task runs its sandbox children under its job's limits and in its job's Triton cache."""

from __future__ import annotations

from typing import Any

from kernelband.sandbox.limits import SandboxLimits, default_triton_cache_dir, triton_cache_dir
from kernelband.scheduling.task_payload import under_job_limits


@under_job_limits
def _limits_seen(payload: dict[str, Any]) -> SandboxLimits:
    return SandboxLimits.from_settings()


def test_a_tasks_runs_take_its_jobs_limits_and_cache_and_nothing_outlives_the_task() -> None:
    seen = _limits_seen({"job_id": 42, "limits": {"run_s": 33.0}})
    assert seen.cache_scope == "42" and seen.wall_s == 33.0
    assert triton_cache_dir(seen).endswith("job-42")
    after = SandboxLimits.from_settings()
    assert after.cache_scope == "" and triton_cache_dir(after) == default_triton_cache_dir()


def test_a_payload_without_a_job_uses_the_shared_cache() -> None:
    assert _limits_seen({}).cache_scope == ""
