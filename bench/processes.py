"""Child processes a benchmark starts, watches and stops (the API server among them): each in its
own process group, its output in a log file, its CPU time and descendants read from /proc
(Linux)."""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass
class Child:
    """A started child process in its own process group, output in `log_path`."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int | None:
        """Signal the group, wait, then SIGKILL it and any descendant left behind."""
        family = descendants(self.popen.pid)
        if self.alive():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                with suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=10)
        kill_pids(family)
        return self.popen.returncode


def start_child(name: str, argv: list[str], env: dict[str, str], log_dir: Path,
                cwd: Path | None = None, user: str | None = None) -> Child:
    """Start `argv` in a new session with stdout+stderr appended to log_dir/name.log."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 user=user, group=group_of(user))
    return Child(name, popen, log_path)


def start_api(env: dict[str, str], log_dir: Path, cwd: Path, workers: int = 1,
              timeout_s: float = 60) -> tuple[Child, str]:
    """uvicorn serving the API's app factory on a free port; waits for /readyz. The child and
    the server's URL."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "--factory", "services.api.app:create_app",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            "--no-access-log", "--workers", str(workers)]
    child = start_child("api", argv, env, log_dir, cwd=cwd)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.alive():
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return child, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    child.stop()
    raise RuntimeError(f"the API did not become ready on {url}: {child.log_tail()}")


def group_of(user: str | None) -> int | None:
    return pwd.getpwnam(user).pw_gid if user else None


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (read from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each pid that is still there (a zombie is left to its parent)."""
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                os.kill(pid, signal.SIGKILL)
        except (OSError, IndexError):
            continue


def free_port() -> int:
    """A TCP port nothing listens on right now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process so far (nan when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
