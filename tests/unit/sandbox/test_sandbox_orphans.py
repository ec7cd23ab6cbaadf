"""A worker killed with SIGKILL takes its warm sandbox child with it: the zygote sees its parent
go and kills the run it was supervising, so no orphan keeps the GPU busy beside the next one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

WORKER = """
import sys
from kernelband.sandbox import SandboxLimits, run_sandboxed
limits = SandboxLimits(wall_s=120.0, cpu_s=120, memory_bytes=1500 * 1024**2, max_procs=20,
                       audit=False, warm=True, interpret=True)
run_sandboxed("kernelband.sandbox.probes:sleep_after_writing_pid",
              {"pid_file": sys.argv[1], "seconds": 120}, limits)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_killed_worker_leaves_no_running_sandbox_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(pid_file)])
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert worker.poll() is None, "the worker ended before its sandbox child started"
            assert time.monotonic() < deadline, "the sandbox child did not start in 120 s"
            time.sleep(0.1)
        child = int(pid_file.read_text())
        assert _alive(child)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the sandbox child outlived its killed worker"
    finally:
        worker.kill()
