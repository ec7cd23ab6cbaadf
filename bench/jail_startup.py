"""Start-up cost of the jail per run, and what Landlock + seccomp would give instead.

`python -m bench.jail_startup [--quick]` measures, on this machine:
- a bare process: `/bin/true` directly and inside the bwrap jail (the jail's own cost);
- a bare interpreter: `python -c pass` directly, jailed, and with Landlock + seccomp applied;
- a sandboxed run (`run_sandboxed`, the echo probe): cold and warm, jailed and not;
- from a forked process (the warm path): fork alone, fork + Landlock + seccomp, fork + the run's
  own namespaces (kernelband/sandbox/forkjail.py);
- what a Landlock + seccomp child can still see (no pid namespace): the answer table.
Writes bench/results/jail_startup.json and the `jail-startup` section of bench/RESULTS.md.
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

nan = float("nan")

JSON_PATH = RESULTS_DIR / "jail_startup.json"
# applied in a child: the runtime read-only, the work dir writable, /proc readable (Python and
# Triton read /proc/self), and seccomp refusing new sockets of the inet families and ptrace
LANDLOCK_CHILD = r"""
import errno, os, socket, sys, json
import landlock, pyseccomp
from landlock import FSAccess
def confine(paths, workdir):
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    rs = landlock.Ruleset()
    for path in paths:  # a file takes file rights only
        rs.allow(path, rules=read if os.path.isdir(path) else FSAccess.READ_FILE)
    rs.allow(workdir)
    rs.apply()
    f = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for family in (socket.AF_INET, socket.AF_INET6):
        f.add_rule(pyseccomp.ERRNO(errno.EPERM), "socket", pyseccomp.Arg(0, pyseccomp.EQ, family))
    f.add_rule(pyseccomp.ERRNO(errno.EPERM), "ptrace")
    f.load()
"""


def have_landlock() -> bool:
    """Landlock and pyseccomp are installed for this comparison only (not in the lock)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("landlock", "pyseccomp"))


def _median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # first call: caches, the zygote
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _runtime_paths() -> list[str]:
    """What the Landlock child may read: the jail's runtime, its /etc files, /proc and /dev."""
    import kernelband
    from kernelband.sandbox.jail import _ETC_FILES

    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(kernelband.__file__)),
             "/usr", "/proc", "/dev", *(os.path.join("/etc", name) for name in _ETC_FILES)}
    return sorted(p for p in paths if os.path.exists(p))


def bare_processes(n: int) -> dict[str, float]:
    """`/bin/true` and `python -c pass`: directly, jailed, under Landlock + seccomp."""
    from kernelband.sandbox import jail

    workdir = tempfile.mkdtemp(dir=jail.runs_parent())
    env = {"PATH": "/usr/bin:/bin"}
    run = lambda argv: subprocess.run(argv, check=True, env=env)  # noqa: E731
    confine = f"{LANDLOCK_CHILD}\nconfine({_runtime_paths()!r}, {workdir!r})"
    imports = "import landlock, pyseccomp"
    try:
        out = {
            "true_direct_ms": _median_ms(lambda: run(["/bin/true"]), n),
            "true_jailed_ms": _median_ms(lambda: run(jail.jail_argv(["/bin/true"], workdir, env)), n),
            "python_direct_ms": _median_ms(lambda: run([sys.executable, "-c", "pass"]), n),
            "python_jailed_ms": _median_ms(
                lambda: run(jail.jail_argv([sys.executable, "-c", "pass"], workdir, env)), n),
            "python_landlock_imports_ms": nan, "python_landlock_applied_ms": nan,
        }
        if have_landlock():
            out["python_landlock_imports_ms"] = _median_ms(
                lambda: run([sys.executable, "-c", imports]), n)
            out["python_landlock_applied_ms"] = _median_ms(
                lambda: run([sys.executable, "-c", confine]), n)
        return out
    finally:
        os.rmdir(workdir)


def sandboxed_runs(n_cold: int, n_warm: int) -> dict[str, float]:
    """`run_sandboxed` of the echo probe, per run (the zygote's own start not counted); jailed
    and unjailed runs alternate, so a shared machine's load falls on both alike."""
    from kernelband.sandbox import SandboxLimits, run_sandboxed, shutdown_pool

    out = {}
    for warm, n in ((False, n_cold), (True, n_warm)):
        samples: dict[str, list[float]] = {"unjailed": [], "jail": []}
        for i in range(n + 1):  # the first round starts the zygotes: not counted
            for isolation in samples:
                limits = SandboxLimits(interpret=True, warm=warm, isolation=isolation)
                start = time.perf_counter()
                _ok(run_sandboxed("kernelband.sandbox.probes:echo", {}, limits))
                if i:
                    samples[isolation].append((time.perf_counter() - start) * 1000)
        for isolation, values in samples.items():
            name = "jailed" if isolation == "jail" else "unjailed"
            out[f"run_{'warm' if warm else 'cold'}_{name}_ms"] = statistics.median(values)
    shutdown_pool()
    return out


def _ok(result: Any) -> None:
    if not result.ok:
        raise RuntimeError(f"a benchmark run failed: {result.reason} {result.message}")


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


def forked(n: int) -> dict[str, float]:
    """What a warm run pays after the fork: nothing, Landlock + seccomp, or its namespaces. Runs
    inside a jailed zygote's view is what the service does; here the namespaces' cost is
    measured through a real warm jailed run instead (sandboxed_runs)."""
    out = {"fork_ms": _fork_ms(lambda: None, n), "fork_landlock_seccomp_ms": nan}
    if not have_landlock():
        return out
    scope: dict[str, Any] = {}
    exec(LANDLOCK_CHILD, scope)  # noqa: S102 - the benchmark's own code
    workdir = tempfile.mkdtemp()
    paths = _runtime_paths()
    try:
        out["fork_landlock_seccomp_ms"] = _fork_ms(lambda: scope["confine"](paths, workdir), n)
        return out
    finally:
        os.rmdir(workdir)


VISIBILITY_CHILD = r"""
import json, os, socket
def attempt(fn):
    try:
        got = fn()
    except OSError as exc:
        return f"refused ({type(exc).__name__})"
    return f"allowed ({len(got)} bytes)" if isinstance(got, str) else "allowed"
ppid = os.getppid()
print(json.dumps({
    "other processes listed in /proc": str(sum(p.isdigit() for p in os.listdir("/proc")) - 1),
    "parent's /proc/PID/cmdline": attempt(lambda: open(f"/proc/{ppid}/cmdline").read()),
    "parent's /proc/PID/environ": attempt(lambda: open(f"/proc/{ppid}/environ").read()),
    "parent's /proc/PID/cwd": attempt(lambda: os.listdir(f"/proc/{ppid}/cwd")),
    "/etc/shadow": attempt(lambda: open("/etc/shadow").read()),
    "/root/.bashrc": attempt(lambda: open("/root/.bashrc").read()),
    "TCP socket to 127.0.0.1:5432": attempt(lambda: socket.create_connection(("127.0.0.1", 5432), 1)),
    "unix socket (abstract)": attempt(lambda: socket.socket(socket.AF_UNIX).connect("\0kb-bench")),
}))
"""


def visibility() -> dict[str, dict[str, str]]:
    """What a child sees under Landlock + seccomp and in the jail (the same probe)."""
    from kernelband.sandbox import jail

    workdir = tempfile.mkdtemp(dir=jail.runs_parent())
    env = {"PATH": "/usr/bin:/bin"}
    confine = f"{LANDLOCK_CHILD}\nconfine({_runtime_paths()!r}, {workdir!r})\n{VISIBILITY_CHILD}"
    try:
        # bwrap started as the pool starts it: with an empty environment of its own
        jailed = subprocess.run(jail.jail_argv([sys.executable, "-c", VISIBILITY_CHILD], workdir, env),
                                capture_output=True, text=True, check=True, env={})
        seen = {"jail": json.loads(jailed.stdout)}
        seen["landlock_seccomp"] = {what: "not installed" for what in seen["jail"]}
        if have_landlock():
            landlocked = subprocess.run([sys.executable, "-c", confine], capture_output=True,
                                        text=True, check=True, env=env)
            seen["landlock_seccomp"] = json.loads(landlocked.stdout)
    finally:
        os.rmdir(workdir)
    return seen


def measure(quick: bool = False) -> dict[str, Any]:
    n = 5 if quick else 20
    data: dict[str, Any] = {"machine": machine_line(), "repeats": n}
    data.update(bare_processes(n))
    data.update(sandboxed_runs(3 if quick else 8, n))
    data.update(forked(n))
    data["visibility"] = visibility()
    JSON_PATH.write_text(json.dumps(data, indent=1))
    return data


def section(data: dict[str, Any]) -> str:
    """The `jail-startup` section of bench/RESULTS.md."""
    d = data
    rows = [
        ("`/bin/true`", fmt(d["true_direct_ms"]), fmt(d["true_jailed_ms"]), "-"),
        ("`python -c pass`", fmt(d["python_direct_ms"]), fmt(d["python_jailed_ms"]),
         f"{fmt(d['python_landlock_applied_ms'])} (imports alone {fmt(d['python_landlock_imports_ms'])})"),
        ("sandboxed run, cold (fresh interpreter)", fmt(d["run_cold_unjailed_ms"]),
         fmt(d["run_cold_jailed_ms"]), "-"),
        ("sandboxed run, warm (forked from the zygote)", fmt(d["run_warm_unjailed_ms"]),
         fmt(d["run_warm_jailed_ms"]), "-"),
        ("after a fork (warm path's own step)", fmt(d["fork_ms"]), "see warm run",
         fmt(d["fork_landlock_seccomp_ms"])),
    ]
    seen = d["visibility"]
    visible = [(what, seen["landlock_seccomp"][what], seen["jail"][what]) for what in seen["jail"]]
    return ("## Jail start-up cost\n\n"
            f"Command: `python -m bench.jail_startup`; {d['machine']} Median of {d['repeats']} "
            "(cold sandboxed runs: fewer), milliseconds per run; the zygote's own start is not "
            "counted. Jailed = bubblewrap (kernelband/sandbox/jail.py); warm jailed runs also "
            "take their own mount, pid, network, IPC and user namespaces after the fork.\n\n"
            + markdown_table(("what", "not jailed ms", "jailed (bwrap) ms", "Landlock + seccomp ms"),
                             rows)
            + "\n\nWhat a child can still reach (the same probe, run under each; in the jail its "
            "parent is bwrap's own pid 1, started with an empty environment):\n\n"
            + markdown_table(("attempt", "Landlock + seccomp", "bwrap jail"), visible))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    data = measure(args.quick)
    write_section("jail-startup", section(data))
    print(section(data))


if __name__ == "__main__":
    main()
