"""The API as an operator starts it by hand (`uvicorn --factory services.api.app:create_app`),
in a child process on a free port, for tests that act as HTTP clients and measure the server."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.utils.fake_llm import free_port
from tests.utils.processes import ManagedProcess, service_env, start_process

API_COMMAND = ["-m", "uvicorn", "--factory", "services.api.app:create_app"]


@contextmanager
def api_process(database_url: str, log_dir: Path, name: str = "api",
                **env: str) -> Iterator[tuple[str, ManagedProcess]]:
    """Start the documented command with `env` (KERNELBAND_* settings); yields (url, process)."""
    port = free_port()
    argv = [sys.executable, *API_COMMAND, "--host", "127.0.0.1", "--port", str(port)]
    child_env = service_env(database_url, "", "", **env)
    proc = start_process(name, argv, child_env, log_dir)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc)
        yield url, proc
    finally:
        proc.terminate()


def _wait_ready(url: str, proc: ManagedProcess, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise AssertionError(f"the API exited at start:\n{proc.log_tail()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the API was not ready within {timeout_s:.0f} s:\n{proc.log_tail()}")


def rss_bytes(pid: int) -> int:
    """The process's resident memory now (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")
