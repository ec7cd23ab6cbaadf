"""Probe: `ncu --mode=launch` a pre-imported parent that forks one child per run, then profile
each child with its own short `ncu --mode=attach` session. Prints when each session's CSV
arrives, relative to the child's own progress lines (in the parent's log)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS = ("sm__throughput.avg.pct_of_peak_sustained_elapsed,"
           "dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum")


def main(ncu: str, runs: int = 3) -> None:
    t0 = time.time()
    log = open("/tmp/launch.log", "w")  # noqa: SIM115 - the launched parent writes it throughout
    parent = subprocess.Popen([ncu, "--mode=launch", "--target-processes", "all", sys.executable,
                               os.path.join(HERE, "ncu_fork_probe.py"), "fork"],
                              stdout=log, stderr=subprocess.STDOUT)
    done = 0
    attempts = 0
    while done < runs and time.time() - t0 < 150:
        attempts += 1
        start = time.time()
        out = subprocess.run([ncu, "--mode=attach", "--hostname", "127.0.0.1", "--csv", "--page",
                              "raw", "--clock-control", "none", "--metrics", METRICS,
                              "--kernel-name", "regex:scale_kernel"],
                             capture_output=True, text=True, timeout=120)
        rows = [line for line in out.stdout.splitlines() if "scale_kernel" in line]
        print(f"{time.time() - t0:8.3f} attach #{attempts} rc={out.returncode} took "
              f"{time.time() - start:.2f}s rows={len(rows)} "
              f"{(out.stdout + out.stderr).strip().splitlines()[-1:] if not rows else rows[0][:60]}",
              flush=True)
        if rows:
            done += 1
        else:
            time.sleep(0.5)
    parent.wait(timeout=60)
    log.close()
    print(f"{time.time() - t0:8.3f} launcher exited rc={parent.returncode}")
    with open("/tmp/launch.log") as f:
        print(f.read()[-3000:])


if __name__ == "__main__":
    main(sys.argv[1])
