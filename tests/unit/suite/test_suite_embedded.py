"""An embedded suite's pool sizes and jobs at once: a GPU suite overlaps its compiles and GPU tasks."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from kernelband.commands.suite import suite
from kernelband.config import Settings
from kernelband.suite.embedded import pool_sizes, with_jobs_at_once
from kernelband.suite.model import SuiteSettings
from services.api.suite_schemas import SuiteSettingsIn


def test_cpu_suite_keeps_one_thread_per_target_and_slot(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    settings = Settings(data_dir=tmp_path, gpu_tasks_per_device=3)
    assert pool_sizes(settings, SuiteSettings(targets=("cpu",), parallelism=1)) == (2, 1)
    assert pool_sizes(settings, SuiteSettings(targets=("cpu",), parallelism=3)) == (3, 1)


def test_gpu_suite_gets_half_the_cores_and_the_gpu_tasks_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(data_dir=tmp_path, gpu_tasks_per_device=3)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert pool_sizes(settings, SuiteSettings(targets=("h100",), parallelism=4)) == (8, 3)
    # more slots than half the cores: one thread per target and slot, as before
    assert pool_sizes(settings, SuiteSettings(targets=("cpu", "h100"), parallelism=6)) == (12, 3)
    monkeypatch.setattr("os.cpu_count", lambda: None)  # unknown: the two-thread floor
    assert pool_sizes(Settings(data_dir=tmp_path, gpu_tasks_per_device=1),
                      SuiteSettings(targets=("h100",), parallelism=1)) == (2, 1)


def test_a_gpu_suite_runs_a_few_jobs_at_once_unless_the_settings_say(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert with_jobs_at_once(settings, SuiteSettings(targets=("cpu",))).max_running_jobs_per_team == 0
    gpu = SuiteSettings(targets=("h100",))
    assert with_jobs_at_once(settings, gpu).max_running_jobs_per_team == settings.warm_originals == 8
    chosen = Settings(data_dir=tmp_path, max_running_jobs_per_team=2)
    assert with_jobs_at_once(chosen, gpu).max_running_jobs_per_team == 2


def test_a_suite_keeps_one_pull_in_flight_per_track_unless_asked() -> None:
    # one pull at a time makes a job's search path independent of which result returns first
    assert SuiteSettings().parallelism == 1
    assert SuiteSettings.from_dict({"targets": ["h100"], "policies": ["kernelband"],
                                    "budget": 4}).parallelism == 1
    assert inspect.signature(suite).parameters["parallel"].default == 1
    assert SuiteSettingsIn.model_fields["parallelism"].default == 1
