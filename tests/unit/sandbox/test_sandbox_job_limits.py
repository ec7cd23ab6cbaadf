"""A job's own sandbox limits apply, over the node's settings, to the runs made on its behalf."""

from __future__ import annotations

import pytest

from kernelband.sandbox import SandboxLimits, job_limits, run_sandboxed
from kernelband.sandbox.limits import job_limit_fields


def test_inside_the_jobs_limits_settings_give_way_and_outside_they_return() -> None:
    node = SandboxLimits.from_settings()
    with job_limits({"run_s": 7, "compile_s": 900, "config_compile_s": None}):
        inside = SandboxLimits.from_settings()
        interpreted = SandboxLimits.from_settings(interpret=True)
    assert (inside.wall_s, inside.compile_s) == (7.0, 900.0)
    assert inside.config_compile_s == node.config_compile_s  # None: the node's setting
    assert interpreted.wall_s == 7.0  # the job's run limit holds in the interpreter too
    assert inside.cpu_s >= 2 * (7 + 900)  # CPU seconds follow the wall budgets
    assert SandboxLimits.from_settings() == node


def test_nested_job_limits_restore_the_outer_ones() -> None:
    with job_limits({"compile_s": 300}):
        with job_limits({"compile_s": 30}):
            assert SandboxLimits.from_settings().compile_s == 30
        assert SandboxLimits.from_settings().compile_s == 300


def test_an_unknown_limit_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="run_s, compile_s, config_compile_s"):
        job_limit_fields({"compile": 5})


def test_a_jobs_compile_limit_stops_its_run_and_says_how_to_raise_it() -> None:
    target = "kernelband.sandbox.probes:compile_then_run"
    with job_limits({"compile_s": 1.0, "run_s": 5.0}):
        limits = SandboxLimits.from_settings(audit=False)
    result = run_sandboxed(target, {"compile": 3.0, "run": 0.0}, limits)
    assert not result.ok and result.reason == "compile_timeout", result
    assert "--compile-limit" in result.message and "limits.compile_s" in result.message
