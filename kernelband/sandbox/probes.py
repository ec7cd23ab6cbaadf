"""Trusted targets that exercise the sandbox itself (used by its tests and benchmarks)."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kernelband.sandbox.compile_budget import CLOCK


def echo(payload: dict[str, Any]) -> dict[str, Any]:
    """Return the payload with facts about the child's environment."""
    return {
        "payload": payload,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "sid_is_pid": os.getsid(0) == os.getpid(),
        "sid": os.getsid(0),  # 0 in a jail: the run's session is led from outside its pid namespace
        "torch_loaded": "torch" in sys.modules,
    }


def sleep(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(float(payload.get("seconds", 3600)))
    return {}


def sleep_unhandled_alarm(payload: dict[str, Any]) -> dict[str, Any]:
    """Sleep with SIGALRM back at its default action, as code that replaces the handler leaves it;
    with `after_budget`, only once the run budget's exception has been swallowed."""
    if payload.get("after_budget"):
        try:
            time.sleep(3600)
        except BaseException:  # noqa: BLE001 - what such code does with the budget's exception
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            time.sleep(3600)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    return sleep(payload)


def exists(payload: dict[str, Any]) -> dict[str, Any]:
    """Which of `paths` the run can see."""
    return {path: os.path.exists(path) for path in payload["paths"]}


def segfault(payload: dict[str, Any]) -> dict[str, Any]:
    ctypes.string_at(0)
    return {}


def exit_now(payload: dict[str, Any]) -> dict[str, Any]:
    os._exit(int(payload.get("code", 3)))


def allocate(payload: dict[str, Any]) -> dict[str, Any]:
    """Touch `gb` gigabytes, one 64 MiB block at a time."""
    blocks = []
    for _ in range(int(float(payload["gb"]) * 16)):
        blocks.append(bytearray(64 * 1024 * 1024))
    return {"blocks": len(blocks)}


def fork_many(payload: dict[str, Any]) -> dict[str, Any]:
    """Start `n` sleeping children (a fork bomb in slow motion)."""
    for _ in range(int(payload["n"])):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    time.sleep(60)
    return {}


def connect(payload: dict[str, Any]) -> dict[str, Any]:
    """Try to reach a TCP address; report the error instead of raising."""
    try:
        with socket.create_connection((payload["host"], int(payload["port"])), timeout=2):
            return {"connected": True}
    except OSError as exc:
        return {"connected": False, "error": type(exc).__name__}


def loopback_roundtrip(payload: dict[str, Any]) -> dict[str, Any]:
    """Listen on 127.0.0.1 and connect to it: whether this namespace's loopback works."""
    try:
        with socket.create_server(("127.0.0.1", 0)) as server, \
                socket.create_connection(server.getsockname()[:2], timeout=2):
            return {"reachable": True}
    except OSError as exc:
        return {"reachable": False, "error": type(exc).__name__}


def write_file(payload: dict[str, Any]) -> dict[str, Any]:
    with open(payload["path"], "w") as f:
        f.write("x")
    return {"written": True}


def spin(payload: dict[str, Any]) -> dict[str, Any]:
    while True:
        pass


def compile_then_run(payload: dict[str, Any]) -> dict[str, Any]:
    """Spend `compile` seconds on the compile clock, then `run` seconds running."""
    CLOCK.timed(time.sleep)(float(payload.get("compile", 0)))
    time.sleep(float(payload.get("run", 0)))
    return {"compile_s": CLOCK.spent}


def stop_compiler(payload: dict[str, Any]) -> dict[str, Any]:
    """Start an allowed tool (the C compiler, waiting on stdin), then stop it as a timeout would;
    with payload["parent"], signal the parent process instead (not allowed)."""
    import subprocess

    if payload.get("parent"):
        try:
            os.kill(os.getppid(), 0)
        except Exception as exc:  # noqa: BLE001 - the probe reports what happened
            return {"killed": False, "error": type(exc).__name__}
        return {"killed": True, "error": None}
    proc = subprocess.Popen(["cc", "-x", "c", "-", "-o", os.devnull], stdin=subprocess.PIPE)
    proc.kill()
    return {"killed": True, "returncode": proc.wait(timeout=10)}


def load_module(payload: dict[str, Any]) -> Any:
    """Import `source` as a candidate module is imported, and return its `REPORT` (what the
    jail tests' attacks found)."""
    # it imports torch; `echo` in a cold child must find torch not loaded
    from kernelband.problem.usercode import import_module_file

    module = import_module_file(str(payload["source"]), "candidate", Path(os.getcwd()), "cpu")
    return getattr(module, "REPORT", None)


def cuda_visible(payload: dict[str, Any]) -> dict[str, Any]:
    """Whether torch sees a GPU from here (the jail binds the device nodes and driver)."""
    import torch

    available = torch.cuda.is_available()
    return {"available": available, "count": torch.cuda.device_count() if available else 0,
            "name": torch.cuda.get_device_name(0) if available else ""}
