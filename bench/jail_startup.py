"""Start-up cost of the jail per run.

`python -m bench.jail_startup [--quick]` measures, on this machine:
- a bare process: `/bin/true` directly and inside the bwrap jail (the jail's own cost);
- a bare interpreter: `python -c pass` directly and jailed;
- a sandboxed run (`run_sandboxed`, the echo probe): cold and warm, jailed and not;
- from a forked process (the warm path): fork alone.
What a jailed child can still reach is tested, not measured (tests/unit/sandbox). Writes bench/results/jail_startup.json and the `jail-startup` section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.common import RESULTS_DIR, fmt, machine_line, markdown_table, write_section
from kernelband.sandbox import SandboxLimits, jail, run_sandboxed, shutdown_pool

JSON_PATH = RESULTS_DIR / "jail_startup.json"


def _median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # first call: caches, the zygote
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bare_processes(n: int) -> dict[str, float]:
    """`/bin/true` and `python -c pass`: directly and jailed."""
    workdir = tempfile.mkdtemp(dir=jail.runs_parent())
    env = {"PATH": "/usr/bin:/bin"}
    run = lambda argv: subprocess.run(argv, check=True, env=env)  # noqa: E731
    try:
        return {
            "true_direct_ms": _median_ms(lambda: run(["/bin/true"]), n),
            "true_jailed_ms": _median_ms(lambda: run(jail.jail_argv(["/bin/true"], workdir, env)), n),
            "python_direct_ms": _median_ms(lambda: run([sys.executable, "-c", "pass"]), n),
            "python_jailed_ms": _median_ms(
                lambda: run(jail.jail_argv([sys.executable, "-c", "pass"], workdir, env)), n),
        }
    finally:
        os.rmdir(workdir)


def sandboxed_runs(n_cold: int, n_warm: int) -> dict[str, float]:
    """`run_sandboxed` of the echo probe, per run (the zygote's own start not counted); jailed
    and unjailed runs alternate, so a shared machine's load falls on both alike."""
    out = {}
    for warm, n in ((False, n_cold), (True, n_warm)):
        samples: dict[str, list[float]] = {"unjailed": [], "jail": []}
        for i in range(n + 1):  # the first round starts the zygotes: not counted
            for isolation in samples:
                limits = SandboxLimits(interpret=True, warm=warm, isolation=isolation)
                start = time.perf_counter()
                result = run_sandboxed("kernelband.sandbox.probes:echo", {}, limits)
                if not result.ok:
                    raise RuntimeError(f"a benchmark run failed: {result.reason} {result.message}")
                if i:
                    samples[isolation].append((time.perf_counter() - start) * 1000)
        for isolation, values in samples.items():
            name = "jailed" if isolation == "jail" else "unjailed"
            out[f"run_{'warm' if warm else 'cold'}_{name}_ms"] = statistics.median(values)
    shutdown_pool()
    return out


def _fork_ms(child: Callable[[], None], n: int) -> float:
    def once() -> None:
        pid = os.fork()
        if pid == 0:
            try:
                child()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return _median_ms(once, n)


def measure(quick: bool = False) -> dict[str, Any]:
    n = 5 if quick else 20
    data: dict[str, Any] = {"machine": machine_line(), "repeats": n}
    data.update(bare_processes(n))
    data.update(sandboxed_runs(3 if quick else 8, n))
    data["fork_ms"] = _fork_ms(lambda: None, n)  # the warm path's own step, namespaces aside
    JSON_PATH.write_text(json.dumps(data, indent=1))
    return data


def section(data: dict[str, Any]) -> str:
    """The `jail-startup` section of bench/RESULTS.md."""
    d = data
    rows = [
        ("`/bin/true`", fmt(d["true_direct_ms"]), fmt(d["true_jailed_ms"])),
        ("`python -c pass`", fmt(d["python_direct_ms"]), fmt(d["python_jailed_ms"])),
        ("sandboxed run, cold (fresh interpreter)", fmt(d["run_cold_unjailed_ms"]),
         fmt(d["run_cold_jailed_ms"])),
        ("sandboxed run, warm (forked from the zygote)", fmt(d["run_warm_unjailed_ms"]),
         fmt(d["run_warm_jailed_ms"])),
        ("after a fork (warm path's own step)", fmt(d["fork_ms"]), "see warm run"),
    ]
    return ("## Jail start-up cost\n\n"
            f"Command: `python -m bench.jail_startup`; {d['machine']} Median of {d['repeats']} "
            "(cold sandboxed runs: fewer), milliseconds per run; the zygote's own start is not "
            "counted. Jailed = bubblewrap (kernelband/sandbox/jail.py); warm jailed runs also "
            "take their own mount, pid, network, IPC and user namespaces after the fork.\n\n"
            + markdown_table(("what", "not jailed ms", "jailed (bwrap) ms"), rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    data = measure(args.quick)
    write_section("jail-startup", section(data))
    print(section(data))


if __name__ == "__main__":
    main()
