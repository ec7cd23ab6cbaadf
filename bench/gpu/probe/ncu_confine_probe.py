"""Probe: which part of the sandbox child's confinement stops a warm ncu pass.

`python ncu_confine_probe.py NCU` starts this file under `ncu --mode=launch` as a zygote that
forks one child per variant. Each child applies the variant (its own session, closed inherited
descriptors, the sandbox rlimits, a new network namespace with loopback up, or all of them),
forks the run that ncu should profile, and attaches `ncu --mode=attach` to it from inside its
own namespace. Prints each child's result.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

T0 = time.time()
VARIANTS = ("plain", "setsid", "closefds", "rlimits", "netns",
            "setsid+closefds+rlimits+netns")
METRICS = "sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum"


def say(text: str) -> None:
    print(f"@@ {time.time() - T0:7.2f} [{os.getpid()}] {text}", flush=True)


def run_kernel() -> None:
    import torch

    x = torch.randn(1 << 22, device="cuda")
    (x * 2).sum().item()
    torch.cuda.synchronize()


def child(variant: str, ncu: str) -> int:
    steps = variant.split("+")
    if "setsid" in steps:
        os.setsid()
    if "closefds" in steps:
        os.closerange(3, 1 << 16)
    if "rlimits" in steps:
        from kernelband.sandbox.child import _set_rlimits

        _set_rlimits({"cpu_s": 120, "max_files": 256, "max_file_bytes": 256 * 1024 * 1024,
                      "max_procs": 64})
    if "netns" in steps:
        from kernelband.sandbox.child import _isolate_network, _loopback_up

        say(f"{variant}: netns {_isolate_network()} loopback {_loopback_up()}")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR")}
    pid = os.fork()
    if pid == 0:
        try:
            run_kernel()
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - a probe reports everything
            say(f"{variant}: grandchild failed {exc!r}")
            os._exit(1)
    deadline = time.time() + 60
    while time.time() < deadline:
        done = os.waitpid(pid, os.WNOHANG)
        if done[0] == pid:
            say(f"{variant}: grandchild ended unprofiled, status {done[1]}")
            return 2
        out = subprocess.run([ncu, "--mode=attach", "--hostname", "127.0.0.1", "--csv", "--page",
                              "raw", "--metrics", METRICS], capture_output=True, text=True,
                             env=env, timeout=60)
        rows = [line for line in out.stdout.splitlines() if line.startswith('"0"')]
        if rows:
            say(f"{variant}: PROFILED {rows[0][:90]}")
            os.waitpid(pid, 0)
            return 0
        last = (out.stdout + out.stderr).strip().splitlines()[-1:]
        time.sleep(0.2)
    say(f"{variant}: no profile, last {last}")
    return 3


def zygote(ncu: str) -> None:
    import torch  # noqa: F401
    import triton  # noqa: F401

    say("zygote ready")
    for variant in VARIANTS:
        start = time.time()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child(variant, ncu)
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        say(f"{variant}: child status {status} ({os.waitstatus_to_exitcode(status)}) "
            f"in {time.time() - start:.2f}s")


if __name__ == "__main__":
    if sys.argv[1] == "zygote":
        zygote(sys.argv[2])
    else:
        ncu = sys.argv[1]
        subprocess.run([ncu, "--mode=launch", "--target-processes", "all", sys.executable,
                        os.path.abspath(__file__), "zygote", ncu], timeout=400, check=False)
