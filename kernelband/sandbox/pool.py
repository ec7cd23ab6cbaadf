"""Starting sandbox children: forked from a warm zygote, or a fresh interpreter (cold)."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from kernelband.sandbox.limits import SandboxLimits, scrubbed_env

log = logging.getLogger(__name__)
# modules every evaluation needs; importing them once in the zygote is what makes it warm
WARM_MODULES = ("kernelband.sandbox.child", "kernelband.sandbox.guard")


@dataclass
class ChildHandle:
    """A started child: its pid (= session id), the read ends, and how to learn its exit."""

    pid: int
    result_r: int
    stderr_r: int
    status_r: int | None = None  # warm: the zygote writes the wait status here
    popen: subprocess.Popen[bytes] | None = None  # cold
    warm: bool = False


def _pipes() -> tuple[tuple[int, int], tuple[int, int]]:
    return os.pipe(), os.pipe()


def spawn_cold(request_path: str, limits: SandboxLimits, workdir: str) -> ChildHandle:
    """A fresh interpreter in its own session."""
    (result_r, result_w), (err_r, err_w) = _pipes()
    try:
        popen = subprocess.Popen(
            [sys.executable, "-m", "kernelband.sandbox.child", request_path, str(result_w)],
            stdin=subprocess.DEVNULL, stdout=err_w, stderr=err_w, pass_fds=(result_w,),
            env=scrubbed_env(limits, workdir), cwd=workdir, start_new_session=True,
        )
    finally:
        os.close(result_w)
        os.close(err_w)
    return ChildHandle(popen.pid, result_r, err_r, popen=popen)


class Zygote:
    """One warm zygote process (per TRITON_INTERPRET setting), restarted when it dies."""

    def __init__(self, interpret: bool) -> None:
        self.interpret = interpret
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        base = tempfile.gettempdir()
        env = scrubbed_env(SandboxLimits(interpret=self.interpret), base)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelband.sandbox.zygote", str(child.fileno()), *WARM_MODULES],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(child.fileno(),),
            env=env, cwd=base, start_new_session=True,
        )
        child.close()
        parent.settimeout(120)
        if json.loads(parent.recv(4096) or b"{}").get("ready") is not True:
            raise OSError("the sandbox zygote did not start")
        parent.settimeout(30)
        self.sock = parent

    def _alive(self) -> bool:
        return self.sock is not None and self.proc is not None and self.proc.poll() is None

    def spawn(self, request_path: str) -> ChildHandle:
        """Fork a child that runs the request; restarts a dead zygote once."""
        (result_r, result_w), (err_r, err_w) = _pipes()
        status_r, status_w = os.pipe()
        try:
            with self.lock:
                if not self._alive():
                    self.close()
                    self._start()
                assert self.sock is not None
                msg = json.dumps({"request": request_path}).encode()
                socket.send_fds(self.sock, [msg], [result_w, err_w, status_w])
                pid = int(json.loads(self.sock.recv(4096))["pid"])
        except BaseException:
            for fd in (result_r, err_r, status_r):
                os.close(fd)
            self.close()
            raise
        finally:
            for fd in (result_w, err_w, status_w):
                os.close(fd)
        return ChildHandle(pid, result_r, err_r, status_r=status_r, warm=True)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


_zygotes: dict[bool, Zygote] = {}
_zygotes_lock = threading.Lock()


def spawn(request_path: str, limits: SandboxLimits, workdir: str) -> ChildHandle:
    """Warm when asked and possible, else cold (with a logged reason)."""
    if limits.warm:
        with _zygotes_lock:
            zygote = _zygotes.setdefault(limits.interpret, Zygote(limits.interpret))
        try:
            return zygote.spawn(request_path)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("sandbox warm pool unavailable (%s); starting a fresh interpreter", exc)
    return spawn_cold(request_path, limits, workdir)


def shutdown_pool() -> None:
    """Stop every zygote (tests, service shutdown)."""
    with _zygotes_lock:
        for zygote in _zygotes.values():
            zygote.close()
        _zygotes.clear()
