"""A worker killed with SIGKILL takes its warm sandbox child with it: the zygote sees its parent
go and kills the run it was supervising, so no orphan keeps the GPU busy beside the next one."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelband.sandbox.watch import session_members

# The worker records the session its run leads (jailed, the run cannot write outside its work
# dir, and the pid it sees is its own namespace's).
WORKER = """
import sys
from kernelband.sandbox import SandboxLimits, pool, run_sandboxed
spawn = pool.spawn
def recording_spawn(*args, **kwargs):
    handle = spawn(*args, **kwargs)
    with open(sys.argv[1], "w") as out:
        out.write(str(handle.pid))
    return handle
pool.spawn = recording_spawn
limits = SandboxLimits(wall_s=120.0, cpu_s=120, memory_bytes=1500 * 1024**2, max_procs=20,
                       audit=False, warm=True, interpret=True)
run_sandboxed("kernelband.sandbox.probes:sleep", {"seconds": 120}, limits)
"""


def _alive(sid: int) -> bool:
    """Whether any live process of the run's session is left."""
    return bool(session_members(sid))


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
        time.sleep(1.0)  # the run's own processes (relay, namespace init, the run) are up
        assert _alive(child)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the sandbox child outlived its killed worker"
    finally:
        worker.kill()
