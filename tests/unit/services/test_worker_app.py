"""The Celery app is configured as DESIGN.md requires; worker messages round-trip."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelband.config import Settings
from kernelband.scheduling.dispatch import queue_for
from services.worker.app import TIME_LIMITS, VISIBILITY_TIMEOUT_S, celery_config
from services.worker.messages import (
    Heartbeat,
    MessageFormatError,
    ResultMessage,
    parse_message,
)
from services.worker.queues import RESULTS_QUEUE, TASK_QUEUES, target_of_queue


@pytest.fixture
def config() -> dict[str, object]:
    return celery_config(Settings(broker_url="redis://h:6379/3", result_backend_url="redis://h/4"))


def test_reliability_settings(config: dict[str, object]) -> None:
    assert config["task_acks_late"] is True and config["task_reject_on_worker_lost"] is True
    assert config["worker_prefetch_multiplier"] == 1
    assert config["task_create_missing_queues"] is False
    assert config["broker_url"] == "redis://h:6379/3"


def test_visibility_timeout_exceeds_every_hard_limit(config: dict[str, object]) -> None:
    longest = max(hard for _, hard in TIME_LIMITS.values())
    for key in ("broker_transport_options", "result_backend_transport_options"):
        assert config[key]["visibility_timeout"] > longest  # type: ignore[index]
    assert longest < VISIBILITY_TIMEOUT_S
    assert all(soft < hard for soft, hard in TIME_LIMITS.values())


def test_queues_are_explicit_and_exclude_results(config: dict[str, object]) -> None:
    names = [q.name for q in config["task_queues"]]  # type: ignore[attr-defined]
    assert sorted(names) == sorted(TASK_QUEUES)
    assert RESULTS_QUEUE not in names  # a Celery worker must never consume results
    assert set(TASK_QUEUES) == {"llm", "cpu", "gpu.rtx4090", "gpu.a100", "gpu.h100", "gpu.h200"}


def test_every_routed_queue_is_consumable() -> None:
    for target in ("rtx4090", "a100", "h100", "h200", "cpu"):
        for kind in ("generate", "compile", "profile", "verify"):
            assert queue_for(kind, target) in TASK_QUEUES
    assert target_of_queue("gpu.h100") == "h100" and target_of_queue("cpu") is None


def test_result_and_heartbeat_messages_round_trip() -> None:
    result = ResultMessage(attempt_id=5, kind="profile", result={"ok": True}, worker="w@h")
    assert parse_message(result.to_dict()) == result
    beat = Heartbeat(worker="w@h", queue="gpu.h100", target="h100", gpu_name="NVIDIA H100",
                     versions={"torch": "2.11"})
    assert parse_message(beat.to_dict()) == beat


@pytest.mark.parametrize("body", [[1], {"type": "other"}, {"type": "result", "kind": "x"}])
def test_malformed_messages_are_refused(body: object) -> None:
    with pytest.raises(MessageFormatError):
        parse_message(body)


def _run(code: str, **env: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", **env})
    return out.stdout.strip()


def test_worker_parent_does_not_import_torch() -> None:
    code = ("import sys, services.worker.app, services.worker.tasks, services.worker.heartbeat;"
            "print('torch' in sys.modules)")
    assert _run(code) == "False"  # so CUDA can not be initialised before the pool forks


def test_worker_start_drops_the_database_url() -> None:
    code = ("import os; from celery import signals; import services.worker.app as a;"
            "from kernelband.config import get_settings;"
            "signals.worker_init.send(sender=None);"
            "print(os.environ.get('KERNELBAND_DATABASE_URL'), repr(get_settings().database_url))")
    assert _run(code, KERNELBAND_DATABASE_URL="postgresql://secret@db/x") == "None ''"
