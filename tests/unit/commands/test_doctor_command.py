"""`kernelband doctor`: findings about this node, exit 0 when nothing needs fixing, else 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kernelband.commands import doctor as doctor_command
from kernelband.config import get_settings
from kernelband.profile.features import Features
from kernelband.profile.measure import Measurement
from kernelband.sandbox import shutdown_pool
from tests.utils.processes import redis_base_url


@pytest.fixture(scope="module")
def app() -> Iterator[typer.Typer]:
    app = typer.Typer()
    doctor_command.register(app)
    app.command("noop")(lambda: None)  # a second command keeps `doctor` a named sub-command
    yield app
    shutdown_pool()


def _run(app: typer.Typer, env: dict[str, str]) -> tuple[int, Any, str]:
    result = CliRunner().invoke(app, ["doctor", "--json"], env=env)
    return result.exit_code, json.loads(result.stdout) if result.exit_code in (0, 1) else None, result.output


def test_a_cpu_node_with_its_services_needs_nothing(app: typer.Typer, postgres_url: str) -> None:
    code, findings, output = _run(app, {"KERNELBAND_BROKER_URL": f"{redis_base_url()}/0",
                                        "KERNELBAND_DATABASE_URL": postgres_url})
    assert code == 0, output
    by_check = {f["check"]: f for f in findings}
    assert list(by_check) == ["device", "sandbox", "nsight", "broker", "database"]
    assert all(f["ok"] for f in findings)
    assert "estimated" in by_check["device"]["detail"]
    assert "without network" in by_check["sandbox"]["detail"]  # the child's own namespace
    assert "answers" in by_check["database"]["detail"]


def test_an_unreachable_broker_is_a_finding_with_advice_and_no_password(app: typer.Typer) -> None:
    code, findings, output = _run(app, {"KERNELBAND_BROKER_URL": "redis://:s3cret@127.0.0.1:1/0",
                                        "KERNELBAND_DATABASE_URL": ""})
    assert code == 1
    broker = next(f for f in findings if f["check"] == "broker")
    assert not broker["ok"] and "KERNELBAND_BROKER_URL" in broker["advice"]
    assert "s3cret" not in output and ":***@127.0.0.1:1" in broker["detail"]
    human = CliRunner().invoke(app, ["doctor"], env={"KERNELBAND_BROKER_URL": "redis://127.0.0.1:1/0",
                                                     "KERNELBAND_DATABASE_URL": ""})
    assert human.exit_code == 1 and "FIX  broker" in human.output and "-> set" in human.output


def test_an_embedded_node_without_a_broker_is_fine_and_a_bad_url_is_a_finding(
        app: typer.Typer) -> None:
    code, findings, output = _run(app, {"KERNELBAND_BROKER_URL": "", "KERNELBAND_DATABASE_URL": ""})
    broker = next(f for f in findings if f["check"] == "broker")
    assert broker["ok"] and "embedded" in broker["detail"], output
    code, findings, output = _run(app, {"KERNELBAND_BROKER_URL": "localhost:6379",
                                        "KERNELBAND_DATABASE_URL": ""})
    broker = next(f for f in findings if f["check"] == "broker")
    assert code == 1 and not broker["ok"] and "KERNELBAND_BROKER_URL" in broker["advice"], output


def test_on_a_gpu_node_an_estimated_h_is_a_finding_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU here: the pass itself is stood in for; what is checked is how its answer is judged.
    monkeypatch.setattr(doctor_command, "find_ncu", lambda: "/opt/ncu")
    monkeypatch.setenv("KERNELBAND_SANDBOX_ISOLATION", "jail")
    get_settings.cache_clear()
    under_jail = doctor_command.check_nsight("h100")
    assert under_jail.ok and "passes off under the jail" in under_jail.detail
    monkeypatch.setenv("KERNELBAND_NCU_UNJAILED", "true")
    get_settings.cache_clear()
    estimated = Features((0.1, 32.0, 0.0, 7.0, 100.0), ("driver",) + ("static",) * 4,
                         (1.0, 2.0, 3.0), ("estimate",) * 3, "ncu permission: ERR_NVGPUCTRPERM")
    measured = Measurement("measured", "cuda events", "NVIDIA H100", "h100", 0.01)
    monkeypatch.setattr(doctor_command, "measure_candidate", lambda *a, **k: (measured, estimated))
    finding = doctor_command.check_nsight("h100")
    assert not finding.ok and "ERR_NVGPUCTRPERM" in finding.detail and finding.advice
    from_ncu = Features(estimated.phi, estimated.phi_sources, (30.0, 80.0, 40.0), ("ncu",) * 3)
    monkeypatch.setattr(doctor_command, "measure_candidate", lambda *a, **k: (measured, from_ncu))
    finding = doctor_command.check_nsight("h100")
    assert finding.ok and "DRAM 80.0%" in finding.detail
    monkeypatch.setattr(doctor_command, "find_ncu", lambda: None)
    assert "install Nsight Compute" in doctor_command.check_nsight("h100").advice
    get_settings.cache_clear()  # the environment goes back after this test: so do the settings
