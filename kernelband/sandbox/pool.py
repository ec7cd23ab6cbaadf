"""Starting sandbox children: forked from a warm zygote, or a fresh interpreter (cold)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from kernelband.sandbox import jail
from kernelband.sandbox.limits import (
    SandboxLimits,
    scrubbed_env,
    triton_cache_dir,
    triton_caches_root,
)

log = logging.getLogger(__name__)
# modules every evaluation needs; importing them once in the zygote is what makes it warm
WARM_MODULES = ("kernelband.sandbox.child", "kernelband.sandbox.guard", "kernelband.sandbox.forkjail",
                "kernelband.sandbox.jail")
ZYGOTE_START_S = 120.0  # importing torch and triton; slower under ncu on a GPU node
# the zygote's environment (kernelband/sandbox/zygote.py reads it)
NCU_LAUNCHED_ENV = "KERNELBAND_NCU_LAUNCHED"  # "1": this zygote was started by `ncu --mode=launch`
# "UID:GID": in a bubblewrap jail; each run gets its own namespaces and runs as UID:GID
JAILED_ENV = "KERNELBAND_ZYGOTE_JAILED"


@dataclass
class ChildHandle:
    """A started child: its pid (= session id), the read ends, and how to learn its exit."""

    pid: int
    result_r: int
    stderr_r: int
    status_r: int | None = None  # warm: the zygote writes the wait status here
    popen: subprocess.Popen[bytes] | None = None  # cold
    warm: bool = False
    jailed: bool = False  # cold: bwrap reports a signal as an exit code


def _pipes() -> tuple[tuple[int, int], tuple[int, int]]:
    return os.pipe(), os.pipe()


def spawn_cold(request_path: str, limits: SandboxLimits, workdir: str,
               jailed: bool = False) -> ChildHandle:
    """A fresh interpreter in its own session (jailed: `bwrap ... python -m ...child`)."""
    (result_r, result_w), (err_r, err_w) = _pipes()
    command = [sys.executable, "-m", "kernelband.sandbox.child", request_path, str(result_w)]
    env = scrubbed_env(limits, workdir)
    if jailed:
        command = jail.jail_argv(command, workdir, env, writable=(triton_cache_dir(limits),),
                                 user=limits.user, gpu=jail.gpu_in_jail(limits.interpret))
        env = {}
    try:
        popen = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=err_w, stderr=err_w, pass_fds=(result_w,),
            env=env, cwd=workdir, start_new_session=True,
        )
    finally:
        os.close(result_w)
        os.close(err_w)
    return ChildHandle(popen.pid, result_r, err_r, popen=popen, jailed=jailed)


class Zygote:
    """One warm zygote process, restarted when it dies. One per TRITON_INTERPRET setting, and a
    `profiled` one that `ncu --mode=launch` starts for Nsight Compute passes."""

    def __init__(self, interpret: bool, profiled: bool = False, jailed: bool = False,
                 user: str = "") -> None:
        self.interpret = interpret
        self.profiled = profiled
        self.jailed = jailed
        self.user = user
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_failed = ""  # profiled or jailed: why it could not start (not tried again)

    def _start(self) -> None:
        base = tempfile.gettempdir()
        env = scrubbed_env(SandboxLimits(interpret=self.interpret), base)
        command = [sys.executable, "-m", "kernelband.sandbox.zygote"]
        if self.profiled:
            self.sock = self._start_launched(command, env, base)
        elif self.jailed:
            self.sock = self._start_jailed(command, env)
        else:
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.proc = subprocess.Popen(
                [*command, str(child.fileno()), *WARM_MODULES], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, pass_fds=(child.fileno(),), env=env, cwd=base,
                start_new_session=True,
            )
            child.close()
            self.sock = parent
        self.sock.settimeout(ZYGOTE_START_S)
        ready = json.loads(self.sock.recv(4096) or b"{}")
        if ready.get("ready") is not True:
            if ready.get("why"):  # its runs cannot be jailed here: not tried again
                self.start_failed = f"a forked run cannot take its own namespaces: {ready['why']}"
            raise OSError(f"the sandbox zygote did not start: {ready.get('why') or 'no answer'}")
        self.sock.settimeout(30)

    def _start_jailed(self, command: list[str], env: dict[str, str]) -> socket.socket:
        """The zygote in a bubblewrap jail that binds the folder of every run's work dir; it keeps
        CAP_SYS_ADMIN inside its own user namespace to give each run its own view
        (kernelband/sandbox/forkjail.py). No --die-with-parent: that follows the starting
        thread, and the zygote ends when this process's end of the socket closes."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        uid, gid = jail.jail_ids(self.user)
        os.makedirs(triton_caches_root(), exist_ok=True)  # bound into the jail: it must exist
        env = {**env, "HOME": "/tmp", "TMPDIR": "/tmp", JAILED_ENV: f"{uid}:{gid}"}
        # uid 0 of its own user namespace (host root is not mapped into the runs' namespaces)
        argv = jail.jail_argv([*command, str(child.fileno()), *WARM_MODULES], jail.runs_parent(),
                              env, writable=(triton_caches_root(),), caps=("CAP_SYS_ADMIN",),
                              die_with_parent=False, ids=(0, 0), gpu=jail.gpu_in_jail(self.interpret))
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     pass_fds=(child.fileno(),), env={}, start_new_session=True)
        child.close()
        return parent

    def _recv_pid(self) -> int:
        """The forked child's pid as this process sees it (jailed: from its credentials)."""
        assert self.sock is not None
        msg, ancdata, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(12))
        pid = int(json.loads(msg)["pid"])
        if not self.jailed:
            return pid
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                return int(struct.unpack("3i", data[:12])[0])
        raise OSError("the jailed zygote's answer carried no credentials")

    def _start_launched(self, command: list[str], env: dict[str, str], base: str) -> socket.socket:
        """The zygote under `ncu --mode=launch`: it connects back over a socket path, since the
        launcher in between need not pass descriptors on."""
        # the profile package loads the measurement modules: sandbox children, which import
        # this module, need none of them
        from kernelband.profile.ncu import find_ncu

        ncu = find_ncu()
        if ncu is None:
            raise OSError("ncu not found: Nsight Compute passes start a fresh interpreter")
        folder = tempfile.mkdtemp(prefix="kb-zygote-")
        path = os.path.join(folder, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(path)
            listener.listen(1)
            listener.settimeout(0.5)
            self.proc = subprocess.Popen(
                [ncu, "--mode=launch", "--target-processes", "all", *command, f"unix:{path}",
                 *WARM_MODULES, "kernelband.profile.ncu_pass"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env={**env, NCU_LAUNCHED_ENV: "1"},
                cwd=base, start_new_session=True,
            )
            deadline = time.monotonic() + ZYGOTE_START_S
            while time.monotonic() < deadline:
                try:
                    return listener.accept()[0]
                except TimeoutError:
                    if self.proc.poll() is not None:
                        raise OSError(f"ncu --mode=launch exited with {self.proc.returncode}") from None
            raise OSError("the ncu-launched sandbox zygote did not connect")
        finally:
            listener.close()
            shutil.rmtree(folder, ignore_errors=True)

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
                    if self.start_failed:  # an ncu or a jail that cannot start it will not next time
                        raise OSError(f"the zygote failed to start: {self.start_failed}")
                    try:
                        self._start()
                    except (OSError, ValueError) as exc:
                        if self.profiled:
                            self.start_failed = str(exc)
                        raise
                assert self.sock is not None
                msg = json.dumps({"request": request_path}).encode()
                socket.send_fds(self.sock, [msg], [result_w, err_w, status_w])
                pid = self._recv_pid()
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
            # its own session: the process group holds a launcher and what it started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None


_zygotes: dict[tuple[bool, bool, bool, str], Zygote] = {}
_zygotes_lock = threading.Lock()


def forks_warm(limits: SandboxLimits) -> bool:
    """Whether a run with these limits is forked from a zygote.

    Not a profiled run whose child becomes another user: ncu's launcher, running as this
    service's user, does not hand such a process to an attach session (seen on an H100: the
    profiled run exits with "Can't parse message of type NV.ProcessTree.ConnectionAcknowledgement
    ... missing required fields: ConnectionName, UId"), so that pass starts a fresh interpreter.
    """
    changes_user = bool(limits.user) and os.geteuid() == 0
    return limits.warm and not (limits.profiled and changes_user)


def spawn(request_path: str, limits: SandboxLimits, workdir: str,
          jailed: bool | None = None) -> ChildHandle:
    """Warm when asked and possible, else cold (with a logged reason). `jailed` (None: as the
    limits and the node decide, `jail.jailed`): in the jail (kernelband/sandbox/jail.py); a
    jailed run forks warm only when its work dir lies in `jail.runs_parent()`, the one folder
    the jailed zygote sees, and otherwise starts cold with only its work dir bound."""
    if jailed is None:
        jailed = jail.jailed(limits.isolation) and not limits.profiled
    outside = jailed and os.path.dirname(os.path.abspath(workdir)) != jail.runs_parent()
    if outside and limits.warm:
        log.info("sandbox: work dir %s is outside %s; this jailed run starts cold", workdir,
                 jail.runs_parent())
    if forks_warm(limits) and not outside:
        with _zygotes_lock:
            key = (limits.interpret, limits.profiled, jailed, limits.user if jailed else "")
            zygote = _zygotes.setdefault(key, Zygote(*key))
        try:
            return zygote.spawn(request_path)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("sandbox warm pool unavailable (%s); starting a fresh interpreter", exc)
    return spawn_cold(request_path, limits, workdir, jailed)


def shutdown_pool() -> None:
    """Stop every zygote (tests, service shutdown)."""
    with _zygotes_lock:
        for zygote in _zygotes.values():
            zygote.close()
        _zygotes.clear()
