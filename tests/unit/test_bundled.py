"""The project installed as a wheel, outside the checkout: bundled data found, commands work.

The wheel is built from this checkout and installed without network into a fresh virtual
environment whose dependencies are the locked environment running this test (a path entry, so
the checkout's editable install is not seen). Every command runs from a directory that is not
the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from tests.utils.fake_llm import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bin/ of a fresh virtual environment holding only the kernelband wheel."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(root / "dist"), str(REPO)], check=True, cwd=root)
    wheel = next((root / "dist").glob("kernelband-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    site = Path(subprocess.check_output(
        [str(root / "venv" / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    (site / "locked_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "venv" / "bin" / "python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    return root / "venv" / "bin"


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("KERNELBAND_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"KERNELBAND_DATA_DIR": str(workdir / "data"), "KERNELBAND_BROKER_URL": ""}


def _kernelband(bin_dir: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "kernelband"), *args], cwd=workdir, env=_env(workdir),
                          capture_output=True, text=True, timeout=300)


def _bundled_example(bin_dir: Path, workdir: Path, name: str) -> Path:
    code = f"from kernelband.bundled import example; print(example({name!r}))"
    return Path(subprocess.check_output([str(bin_dir / "python"), "-c", code], cwd=workdir,
                                        env=_env(workdir), text=True).strip())


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, workdir: Path) -> None:
    example = _bundled_example(installed, workdir, "vector_add")
    assert installed.parent in example.parents and REPO not in example.resolve().parents
    assert example.is_file()


def test_migrate_check_and_optimize_run_from_the_wheel(installed: Path, workdir: Path) -> None:
    migrated = _kernelband(installed, workdir, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "is at revision" in migrated.stdout
    example = _bundled_example(installed, workdir, "vector_add")
    checked = _kernelband(installed, workdir, "check", str(example))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "CORRECT vector_add" in checked.stdout
    optimized = _kernelband(installed, workdir, "optimize", str(example), "--budget", "1",
                            "--target", "cpu", "--out", str(workdir / "best.py"))
    assert optimized.returncode == 0, optimized.stdout + optimized.stderr
    assert "cpu: completed" in optimized.stdout and (workdir / "best.py").is_file()


def test_doctor_and_suite_run_from_the_wheel(installed: Path, workdir: Path) -> None:
    doctor = _kernelband(installed, workdir, "doctor", "--json")
    assert doctor.returncode in (0, 1), doctor.stderr  # 1: a finding needs attention, not a crash
    checks = {finding["check"] for finding in json.loads(doctor.stdout)}
    assert {"device", "sandbox"} <= checks
    suite_dir = workdir / "problems"
    suite_dir.mkdir()
    (suite_dir / "vector_add.py").write_text(_bundled_example(installed, workdir, "vector_add").read_text())
    suite = _kernelband(installed, workdir, "suite", str(suite_dir), "--budget", "1",
                        "--target", "cpu", "--json", str(workdir / "suite.json"))
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "jobs finished 1/1" in suite.stdout  # piped output gets plain progress lines
    assert json.loads((workdir / "suite.json").read_text())


def test_serve_answers_with_the_dashboard_from_the_wheel(installed: Path, workdir: Path) -> None:
    port = free_port()
    server = subprocess.Popen([str(installed / "kernelband"), "serve", "--port", str(port)],
                              cwd=workdir, env=_env(workdir), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "kernelband serve did not become ready in 120 s"
            time.sleep(0.5)
        signin = httpx.get(f"{base}/ui/signin", timeout=10)
        assert signin.status_code == 200 and "<html" in signin.text.lower()
        assert httpx.get(f"{base}/ui/static/common.js", timeout=10).status_code == 200
    finally:
        server.terminate()
        server.wait(30)
