"""The child side of a sandboxed run: confine this process, run the target, write JSON.

Used by the zygote (after fork) and by the cold path (`python -m kernelband.sandbox.child
REQUEST_FILE RESULT_FD`). Nothing here is ever pickled: the result is one JSON document.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import sys
import traceback
from typing import Any

from kernelband.problem import autotune_compile
from kernelband.sandbox import compile_budget, guard
from kernelband.sandbox.privileges import drop_privileges

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def _set_rlimits(limits: dict[str, Any]) -> None:
    cpu = int(limits["cpu_s"])
    # soft < hard so the kernel sends SIGXCPU first (reported as cpu_limit), then SIGKILL
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["max_files"], limits["max_files"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_bytes"], limits["max_file_bytes"]))
    # RLIMIT_NPROC does not bind root; the parent's watchdog counts processes as well
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_procs"], limits["max_procs"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _isolate_network() -> bool:
    """A private, empty network namespace; False when the OS does not permit it."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
    return int(libc.unshare(flags)) == 0


def _loopback_up() -> bool:
    """Bring `lo` up in this (new, empty) network namespace; False where that is refused."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
            fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))
    except OSError:
        return False
    return True


def confine(request: dict[str, Any]) -> bool:
    """Apply limits, cwd, env and audit policy to this process; returns network isolation."""
    limits = request["limits"]
    workdir = request["workdir"]
    _set_rlimits(limits)
    if limits.get("cores"):  # off the node's measuring cores; a timing runner re-pins itself
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, limits["cores"])
    if request.get("triton_cache"):  # its job's own (a warm child inherits the zygote's)
        os.environ["TRITON_CACHE_DIR"] = str(request["triton_cache"])
    if request.get("jailed"):
        isolated = True  # the jail's own network namespace (only its loopback) and its own uid
    else:
        isolated = False if limits["network"] else _isolate_network()
        if isolated and limits.get("profiled"):
            _loopback_up()  # only this namespace's loopback: where ncu's attach session reaches it
        drop_privileges(limits.get("user") or "", workdir)  # after the steps that need root
    os.chdir(workdir)
    os.environ["HOME"] = workdir
    os.environ["TMPDIR"] = workdir
    os.environ.update(limits.get("extra_env") or {})
    if limits["audit"]:
        guard.install((workdir, os.environ.get("TRITON_CACHE_DIR", workdir)))
    return isolated


def _call_target(target: str, payload: dict[str, Any]) -> Any:
    module_name, _, func_name = target.partition(":")
    func = getattr(importlib.import_module(module_name), func_name)
    return func(payload)


def run_request(request: dict[str, Any], result_fd: int) -> None:
    """Confine, run the target, write {"ok", "value"|"reason", ...} to `result_fd`."""
    isolated = confine(request)
    limits = request["limits"]
    # on a GPU an autotuned kernel's configs compile side by side (patched before the compile
    # clock wraps the autotuner, so that clock counts the side-by-side compiles once); a config
    # still compiling after config_compile_s is left out and its clock time released
    autotune_compile.install(float(limits.get("config_compile_s", 0.0)), compile_budget.CLOCK.release)
    if limits.get("compile_s"):
        compile_budget.start(float(limits["wall_s"]), float(limits["compile_s"]))
    try:
        value = _call_target(request["target"], request["payload"])
        compile_budget.stop()
        doc: dict[str, Any] = {"ok": True, "value": value, "network_isolated": isolated}
    except BaseException as exc:  # the target's failure is a result, never a crash of ours
        compile_budget.stop()
        doc = {
            "ok": False,
            "reason": getattr(exc, "sandbox_reason", f"exception:{type(exc).__name__}"),
            "message": str(exc)[:2000],
            "traceback": traceback.format_exc()[-4000:],
            "network_isolated": isolated,
        }
    data = json.dumps(doc, default=repr).encode()
    with os.fdopen(result_fd, "wb", closefd=True) as out:
        out.write(data)


def read_request(path: str) -> dict[str, Any]:
    """Read and delete the request file (so untrusted code cannot read it back)."""
    with open(path, encoding="utf-8") as f:
        request: dict[str, Any] = json.load(f)
    os.unlink(path)
    return request


def main() -> None:
    """Cold path entry: `python -m kernelband.sandbox.child REQUEST_FILE RESULT_FD`."""
    request = read_request(sys.argv[1])
    run_request(request, int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: untrusted atexit hooks and slow torch shutdown


if __name__ == "__main__":
    main()
