"""The runtime policy of a sandbox child, as a `sys.addaudithook` hook (it cannot be removed).

It refuses writes outside the private temp dir (and Triton's cache), sockets, new processes
(except the compilers Triton itself runs on a GPU node) and signals to other processes. Each
refusal is also recorded, so a candidate that swallows the exception is still caught.
"""

from __future__ import annotations

import os
import sys
from typing import Any


class SandboxViolation(PermissionError):
    """Untrusted code tried something the sandbox forbids."""


VIOLATIONS: list[str] = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# Executables Triton launches while compiling for a GPU (ptxas and friends, the C launcher stub).
# `file`: platform.architecture() runs `file -b python` while triton 3.6 builds its launcher.
_ALLOWED_TOOLS = {"gcc", "cc", "clang", "g++", "c++", "ldconfig", "ptxas", "ptxas-blackwell",
                  "cuobjdump", "nvdisasm", "file", "ncu"}
_FORBIDDEN_EVENTS = {
    "os.system": "os.system",
    "os.fork": "os.fork",
    "os.forkpty": "os.forkpty",
    "os.exec": "os.exec",
    "os.posix_spawn": "os.posix_spawn",
    "os.spawn": "os.spawn",
    "socket.connect": "socket connect",
    "socket.bind": "socket bind",
    "socket.sendto": "socket sendto",
    "socket.sendmsg": "socket sendmsg",
    "socket.getaddrinfo": "DNS lookup",
}
_PATH_EVENTS = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "shutil.rmtree", "os.chmod")
_state: dict[str, Any] = {"installed": False, "allowed_dirs": ()}


def _violation(what: str) -> None:
    VIOLATIONS.append(what)
    raise SandboxViolation(f"sandbox: {what} is not allowed for candidate code")


def _is_write(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and flags > 0 and bool(flags & _WRITE_FLAGS)


def _inside_allowed(path: Any) -> bool:
    if isinstance(path, int):
        return True  # an already open descriptor
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return True
    real = os.path.realpath(path)
    if real == os.devnull:
        return True
    dirs: tuple[str, ...] = _state["allowed_dirs"]
    return any(real == d or real.startswith(d + os.sep) for d in dirs)


def _tool_allowed(executable: Any, args: Any) -> bool:
    name = executable if executable else (args[0] if isinstance(args, list | tuple) and args else args)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    return isinstance(name, str) and os.path.basename(name) in _ALLOWED_TOOLS


def _own_child(event: str, pid: Any) -> bool:
    """True when `pid` is a process this one started (a compiler it may stop, e.g. on a
    timeout); a process group or anything else is another process."""
    if event != "os.kill" or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:  # noqa: PTH123 - hook: keep it minimal
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    return int(fields[1]) == os.getpid()  # field 4 of /proc/PID/stat: the parent's pid


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, mode, flags = (list(args) + [None, None, None])[:3]
        if _is_write(mode, flags) and not _inside_allowed(path):
            _violation(f"writing {path!r} (outside the sandbox temp dir)")
    elif event in _FORBIDDEN_EVENTS:
        _violation(_FORBIDDEN_EVENTS[event])
    elif event == "subprocess.Popen":
        if not _tool_allowed(args[0], args[1]):
            _violation(f"starting a process ({args[1]!r})")
    elif event in ("os.kill", "os.killpg"):
        if args and args[0] not in (0, os.getpid()) and not _own_child(event, args[0]):
            _violation(f"{event} of another process")
    elif event in _PATH_EVENTS and args and not _inside_allowed(args[0]):
        _violation(f"{event} of {args[0]!r} (outside the sandbox temp dir)")


def install(allowed_dirs: tuple[str, ...]) -> None:
    """Install the hook once per process; `allowed_dirs` may be written to."""
    _state["allowed_dirs"] = tuple(os.path.realpath(d) for d in allowed_dirs)
    if not _state["installed"]:
        import subprocess  # posix_spawn would trip "os.posix_spawn" after the Popen tool check passed

        setattr(subprocess, "_USE_POSIX_SPAWN", False)  # noqa: B010 - fork+exec, checked by Popen
        sys.addaudithook(_hook)
        _state["installed"] = True
