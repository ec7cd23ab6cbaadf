"""docker-compose.yml and the Dockerfile match the code: services, commands, queues, Settings
variables, and an image that holds what the services run."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelband.config import Settings
from services.worker.queues import GPU_TARGETS, TASK_QUEUES

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
# Executables the compose commands call, and the pyproject dependency that installs each.
CONSOLE_SCRIPTS = {"uvicorn": "uvicorn", "celery": "celery"}
# Executables the healthchecks call that come from a Debian package the Dockerfile installs.
APT_EXECUTABLES = {"pgrep": "procps"}
LONG_RUNNING = ("postgres", "redis", "api", "scheduler", "worker-llm", "worker-cpu",
                *(f"worker-gpu-{t}" for t in GPU_TARGETS))
SETTINGS_VARIABLES = {f"KERNELBAND_{name.upper()}" for name in Settings.model_fields}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    assert DOCKERFILE.is_file(), "docker-compose.yml builds `.`, which needs a Dockerfile"
    return _instructions(DOCKERFILE.read_text())


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per logical line, continuations joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def _arguments(dockerfile: list[tuple[str, str]], keyword: str) -> list[str]:
    return [arguments for k, arguments in dockerfile if k == keyword]


def _built(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in _services(compose).items() if "build" in s}


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def _dependencies() -> set[str]:
    return {re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0].lower() for d in _project()["dependencies"]}


def _image_has(executable: str, dockerfile: list[tuple[str, str]]) -> bool:
    """python, a console script of a pyproject dependency, or a Debian package's program."""
    if executable in APT_EXECUTABLES:
        installs = " ".join(_arguments(dockerfile, "RUN"))
        return bool(re.search(rf"apt-get install .*\b{APT_EXECUTABLES[executable]}\b", installs))
    if executable in _project()["scripts"]:  # the project's own console script
        return any(re.search(r"pip install (\S+ )*\.( |$)", r) for r in _arguments(dockerfile, "RUN"))
    return executable == "python" or CONSOLE_SCRIPTS.get(executable) in _dependencies()


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
    assert services["migrate"]["command"] == ["kernelband", "migrate"]
    api = services["api"]["command"]
    assert api[0] == "uvicorn"
    target = next(a for a in api[1:] if not a.startswith("-"))
    module, attribute = target.split(":")
    made = getattr(importlib.import_module(module), attribute)  # what uvicorn will look up
    if "--factory" in api:
        from fastapi import FastAPI

        assert isinstance(made(), FastAPI)  # the factory builds the app without a database
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


def test_gpu_workers_reserve_one_gpu_and_run_the_nodes_gpu_tasks_at_once(compose: dict[str, Any]) -> None:
    for target in GPU_TARGETS:
        service = _services(compose)[f"worker-gpu-{target}"]
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"] and devices[0]["count"] == 1
        assert _flag(service["command"], "-c") == str(Settings.model_fields["gpu_tasks_per_device"].default)
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


def test_dockerfile_copies_only_paths_in_the_build_context(dockerfile: list[tuple[str, str]]) -> None:
    ignored = [p for p in DOCKERIGNORE.read_text().splitlines() if p and not p.startswith("#")]
    for arguments in _arguments(dockerfile, "COPY"):
        *sources, _ = [word for word in arguments.split() if not word.startswith("--")]
        for source in sources:
            path = source.rstrip("/")
            assert (ROOT / path).exists(), f"COPY {source}: no such path in the repository"
            assert not any(fnmatch(path, p) for p in ignored), f"COPY {source}: .dockerignore drops it"


def test_image_installs_the_project_from_pyproject(dockerfile: list[tuple[str, str]]) -> None:
    assert any("pyproject.toml" in arguments.split() for arguments in _arguments(dockerfile, "COPY"))
    assert any(re.search(r"pip install (\S+ )*\.( |$)", r) for r in _arguments(dockerfile, "RUN"))


def test_image_runs_the_installed_package_with_locked_dependencies(
        dockerfile: list[tuple[str, str]]) -> None:
    # Migrations, examples and dashboard assets are package data: no source tree on the path.
    assert "PYTHONPATH" not in " ".join(_arguments(dockerfile, "ENV"))
    copied = " ".join(_arguments(dockerfile, "COPY"))
    assert "migrations" not in copied and "requirements/" in copied
    assert any("requirements/service.txt" in r for r in _arguments(dockerfile, "RUN"))
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in " ".join(_arguments(dockerfile, "ENV"))


def test_image_ends_as_a_non_root_user(dockerfile: list[tuple[str, str]]) -> None:
    keywords = [keyword for keyword, _ in dockerfile]
    assert "USER" in keywords, "the image must not run the services as root"
    last_user = len(keywords) - 1 - keywords[::-1].index("USER")
    assert _arguments(dockerfile, "USER")[-1].split(":")[0] not in ("root", "0")
    assert "RUN" not in keywords[last_user:], "a RUN after the last USER runs as that user"


def test_built_services_call_executables_the_image_has(
    compose: dict[str, Any], dockerfile: list[tuple[str, str]]
) -> None:
    for name, service in _built(compose).items():
        assert _image_has(service["command"][0], dockerfile), f"{name}: {service['command'][0]}"
        test = service.get("healthcheck", {}).get("test", [])
        if test:
            executable = test[1].split()[0] if test[0] == "CMD-SHELL" else test[1]
            assert _image_has(executable, dockerfile), f"{name} healthcheck: {executable}"


def test_dockerignore_keeps_the_virtualenv_and_git_history_out() -> None:
    ignored = set(DOCKERIGNORE.read_text().splitlines())
    assert {".venv", ".git"} <= ignored
