"""docker-compose.yml matches the code: services, commands, queues and Settings variables."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelband.config import Settings
from services.worker.queues import GPU_TARGETS, TASK_QUEUES

COMPOSE = Path(__file__).resolve().parents[3] / "docker-compose.yml"
LONG_RUNNING = ("postgres", "redis", "api", "scheduler", "worker-llm", "worker-cpu",
                *(f"worker-gpu-{t}" for t in GPU_TARGETS))
SETTINGS_VARIABLES = {f"KERNELBAND_{name.upper()}" for name in Settings.model_fields}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]  # type: ignore[no-any-return]


def _flag(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _module_exists(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def test_every_part_of_the_deployment_is_a_service(compose: dict[str, Any]) -> None:
    assert set(LONG_RUNNING) | {"migrate"} <= set(_services(compose))


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    missing = [n for n in LONG_RUNNING if "test" not in _services(compose)[n].get("healthcheck", {})]
    assert missing == []


def test_commands_point_at_modules_that_exist(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    api = services["api"]["command"]
    assert api[0] == "uvicorn" and _module_exists(api[1].split(":")[0])
    scheduler = services["scheduler"]["command"]
    assert scheduler[:3] == ["python", "-m", "services.scheduler"]
    assert _module_exists("services.scheduler.__main__")
    for name, service in services.items():
        if name.startswith("worker-"):
            assert _module_exists(_flag(service["command"], "-A")), name


def test_worker_queues_are_the_workers_queue_constants(compose: dict[str, Any]) -> None:
    consumed: dict[str, str] = {}
    for name, service in _services(compose).items():
        if name.startswith("worker-"):
            for queue in _flag(service["command"], "-Q").split(","):
                assert queue in TASK_QUEUES, f"{name} consumes unknown queue {queue}"
                consumed[queue] = name
    assert set(consumed) == set(TASK_QUEUES)  # every queue has a consumer, results has none


def test_gpu_workers_reserve_one_gpu_and_run_one_task_at_a_time(compose: dict[str, Any]) -> None:
    for target in GPU_TARGETS:
        service = _services(compose)[f"worker-gpu-{target}"]
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"] and devices[0]["count"] == 1
        assert _flag(service["command"], "-c") == "1"
        assert _flag(service["command"], "-Q") == f"gpu.{target}"


def test_environment_names_are_settings_fields(compose: dict[str, Any]) -> None:
    for name, service in _services(compose).items():
        for variable in service.get("environment", {}):
            if variable.startswith("KERNELBAND_"):
                assert variable in SETTINGS_VARIABLES, f"{name}: {variable} is not a Settings field"


def test_workers_get_no_database_credentials(compose: dict[str, Any]) -> None:
    for name, service in _services(compose).items():
        if name.startswith("worker-"):
            assert "KERNELBAND_DATABASE_URL" not in service.get("environment", {}), name


def test_database_users_get_the_url(compose: dict[str, Any]) -> None:
    for name in ("migrate", "api", "scheduler"):
        assert "KERNELBAND_DATABASE_URL" in _services(compose)[name]["environment"], name


def test_required_secrets_are_guarded() -> None:
    text = COMPOSE.read_text()
    for variable in ("POSTGRES_PASSWORD", "KERNELBAND_BOOTSTRAP_TOKEN"):
        assert re.search(r"\$\{" + variable + r":\?[^}]+\}", text), variable
    assert not re.search(r"\$\{POSTGRES_PASSWORD:-", text)  # no silent default password


def test_dependencies_name_existing_services(compose: dict[str, Any]) -> None:
    services = _services(compose)
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
