"""A live sandboxed runner: the judge sends commands to a running child and reads its replies.

The child is started by `pool.spawn`, like every sandboxed run, so it is confined the same way.
The channel is two FIFOs in the child's workdir (commands in, replies out), one JSON document
per line; bulk data (output tensors) goes through files in the workdir, which the judge reads
itself. The judge can pause the child's whole process group (SIGSTOP) while it times another
runner, so nothing the child started keeps running meanwhile. `close()` ends the run and returns
its `SandboxResult`, as `run_sandboxed` would.

A child's reply is raw material: the session gives the judge its own clock around every
command (`Reply.wall_s`), and never interprets what the child says about time.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import time
from dataclasses import dataclass, replace
from typing import Any

from kernelband.sandbox import pool, preempt
from kernelband.sandbox.limits import SandboxLimits, SandboxResult, triton_cache_dir
from kernelband.sandbox.runner import prepare_run
from kernelband.sandbox.watch import kill_session, session_members, session_usage, stat_fields

COMMANDS_FIFO = "commands.fifo"
REPLIES_FIFO = "replies.fifo"
MAX_REPLY_BYTES = 1 << 20  # replies are small; bulk data goes through files
STDERR_TAIL_BYTES = 4000
CLOSE_TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WATCH_EVERY_S = 0.5
PAUSE_WAIT_S = 0.1  # memory and process-count look, at most this often during a command
# Finding a session's processes reads the stat file of every process on the host (about 15 us
# each): on a busy GPU node that was 6 ms per pause, once per timed batch, 40% of the timed
# rounds' wall time. A pause waits for the processes found by a scan at most this old; one started
# since is in the runner's process group, which the SIGSTOP reaches all the same.
MEMBERS_RESCAN_S = 1.0


class SessionError(RuntimeError):
    """The runner broke the session (died, hung, overran a limit); `reason` names it."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Reply:
    """One reply and the judge's own wall-clock seconds from sending the command to reading it."""

    value: dict[str, Any]
    wall_s: float


class RunnerSession:
    """A running sandbox child serving `target(payload)`; see the module doc."""

    def __init__(self, target: str, payload: dict[str, Any], limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits.from_settings()
        jailed, self.workdir = prepare_run(self.limits, prefix="kb-session-")
        for name in (COMMANDS_FIFO, REPLIES_FIFO):
            os.mkfifo(os.path.join(self.workdir, name), 0o666)
            os.chmod(os.path.join(self.workdir, name), 0o666)  # a sandbox user other than ours
        request_path = os.path.join(self.workdir, ".request.json")
        body = {**payload, "commands": COMMANDS_FIFO, "replies": REPLIES_FIFO}
        with open(request_path, "w", encoding="utf-8") as f:
            json.dump({"target": target, "payload": body, "limits": self.limits.to_dict(),
                       "workdir": self.workdir, "jailed": jailed,
                       "triton_cache": triton_cache_dir(self.limits)}, f)
        # read-write on our side: opening never blocks, and a reader never sees end-of-file
        # before the child has opened its end
        self._commands = os.open(os.path.join(self.workdir, COMMANDS_FIFO), os.O_RDWR)
        self._replies = os.open(os.path.join(self.workdir, REPLIES_FIFO), os.O_RDWR | os.O_NONBLOCK)
        self.started = time.monotonic()
        self.handle = pool.spawn(request_path, self.limits, self.workdir, jailed)
        self._listed = preempt.enabled()  # other measurements' timed rounds may stop it
        if self._listed:
            preempt.arrive(self.handle.pid)
        os.set_blocking(self.handle.stderr_r, False)
        self._stderr = bytearray()
        self._buffer = bytearray()
        self.paused = False
        self.closed: SandboxResult | None = None
        self._members: list[int] = []
        self._members_scanned = -MEMBERS_RESCAN_S

    @property
    def pid(self) -> int:
        return self.handle.pid

    def path(self, name: str) -> str:
        """A file of the child's workdir (bulk data the child was asked to write)."""
        if os.path.basename(name) != name or name.startswith("."):
            raise ValueError(f"{name!r}: a session file is a plain name inside the workdir")
        return os.path.join(self.workdir, name)

    def request(self, command: dict[str, Any], timeout_s: float) -> Reply:
        """Send one command and wait for its reply, timed by this process's clock."""
        return self.receive(command, self.send(command), timeout_s)

    def send(self, command: dict[str, Any]) -> float:
        """Send one command without waiting (the runner answers commands in the order they
        came); returns the judge's clock at sending, for `receive`."""
        if self.closed is not None:
            raise SessionError("closed", "the runner session is closed; start a new one")
        self.resume()
        line = json.dumps(command).encode() + b"\n"
        start = time.perf_counter()
        os.write(self._commands, line)
        return start

    def receive(self, command: dict[str, Any], sent: float, timeout_s: float) -> Reply:
        """The reply to the oldest command not yet answered (`command`, sent at `sent`)."""
        raw = self._read_line(sent + timeout_s, command.get("cmd", "?"))
        wall = time.perf_counter() - sent
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise SessionError("bad_reply", f"the runner answered {raw[:80]!r} to {command.get('cmd')}: "
                               "not a JSON object")
        return Reply(value, wall)

    def _read_line(self, deadline_perf: float, what: str) -> bytes:
        next_watch = time.monotonic() + WATCH_EVERY_S
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > MAX_REPLY_BYTES:
                self._fail("bad_reply", f"the runner's reply to {what} exceeds {MAX_REPLY_BYTES} bytes")
            left = deadline_perf - time.perf_counter()
            if left <= 0 and self._listed:  # time stopped by others' timed rounds is not its own
                left += preempt.stopped_s(self.handle.pid)
            if left <= 0:
                self._fail("timeout", f"the runner did not answer {what} in time")
            readable, _, _ = select.select([self._replies, self.handle.stderr_r], [], [], min(left, 0.05))
            if self._replies in readable:
                with contextlib.suppress(BlockingIOError):
                    self._buffer += os.read(self._replies, 1 << 16)
            if self.handle.stderr_r in readable:
                self._drain_stderr()
            if self._replies not in readable:
                if self._ended():
                    self._fail("exited", f"the runner ended while answering {what}")
                if time.monotonic() >= next_watch:
                    next_watch = time.monotonic() + WATCH_EVERY_S
                    self._watch(what)

    def _drain_stderr(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            chunk = os.read(self.handle.stderr_r, 1 << 16)
            self._stderr = (self._stderr + chunk)[-STDERR_TAIL_BYTES:]

    def _watch(self, what: str) -> None:
        nprocs, rss = session_usage(self.handle.pid)
        if nprocs > self.limits.max_procs:
            self._fail("too_many_processes", f"the runner started too many processes during {what}")
        if rss > self.limits.memory_bytes:
            self._fail("memory_limit", f"the runner exceeded its memory limit during {what}")

    def _ended(self) -> bool:
        if self.handle.popen is not None:
            return self.handle.popen.poll() is not None
        status = self.handle.status_r
        return status is not None and bool(select.select([status], [], [], 0)[0])

    def _fail(self, reason: str, message: str) -> None:
        result = self._finish(reason)
        tail = result.stderr_tail.strip().splitlines()[-1:] if result.stderr_tail.strip() else []
        raise SessionError(reason, message + (f" ({tail[0]})" if tail else ""))

    def cpu_seconds(self) -> float:
        """CPU time the kernel has charged to the runner's session so far (every process and
        thread, exited threads included): a clock the runner cannot rewrite."""
        total = 0
        for fields in _members_stat(self.handle.pid):
            total += int(fields[11]) + int(fields[12])  # utime, stime (whole thread group)
        return total / CLOCK_TICKS

    def pause(self) -> None:
        """Stop every process of the runner's session (SIGSTOP to its process group); returns
        once they are stopped, since the signal is delivered asynchronously."""
        if not self.paused and self.closed is None:
            preempt.pause_group(self.handle.pid)
            self.paused = True
            deadline = time.monotonic() + PAUSE_WAIT_S
            while not self._all_stopped() and time.monotonic() < deadline:
                time.sleep(0.0002)

    def _all_stopped(self) -> bool:
        return all(fields[0] in ("T", "t") for fields in self._known_members_stat())

    def _known_members_stat(self) -> list[list[str]]:
        """Stat fields of the session's processes as of a scan at most MEMBERS_RESCAN_S old
        (each still checked to be alive and in the session: a reused pid is not a member)."""
        now = time.monotonic()
        if now - self._members_scanned >= MEMBERS_RESCAN_S:
            self._members = [pid for pid, _ in session_members(self.handle.pid)]
            self._members_scanned = now
        return _stats_in_session(self.handle.pid, self._members)

    def resume(self) -> None:
        if self.paused and self.closed is None:
            preempt.resume_group(self.handle.pid)  # not while another measurement's timed rounds run
        self.paused = False

    def close(self) -> SandboxResult:
        """Ask the runner to finish, wait for its result, kill what is left, remove the workdir."""
        if self.closed is not None:
            return self.closed
        self.resume()
        with contextlib.suppress(OSError):
            os.write(self._commands, b'{"cmd": "close"}\n')
        return self._finish("")

    def _finish(self, reason: str) -> SandboxResult:
        if self.closed is not None:
            return self.closed
        deadline = time.monotonic() + (0.0 if reason else CLOSE_TIMEOUT_S)
        result = bytearray()
        os.set_blocking(self.handle.result_r, False)
        while True:
            readable, _, _ = select.select([self.handle.result_r], [], [], 0.05)
            chunk = b""
            if readable:
                with contextlib.suppress(BlockingIOError):
                    chunk = os.read(self.handle.result_r, 1 << 20)
                    result += chunk
            if (readable and not chunk) or time.monotonic() >= deadline:
                break
        self._drain_stderr()
        if self.paused:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.handle.pid, signal.SIGCONT)
        kill_session(self.handle.pid)
        self._wait_exit()
        if self._listed:
            preempt.leave(self.handle.pid)
        for fd in (self._commands, self._replies, self.handle.result_r, self.handle.stderr_r,
                   self.handle.status_r):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.closed = _result(bytes(result), reason, self)
        return self.closed


    def _wait_exit(self) -> None:
        """Wait until the child is reaped: a warm child's zygote writes its status to our pipe,
        which must stay open until then."""
        if self.handle.popen is not None:
            with contextlib.suppress(Exception):
                self.handle.popen.wait(timeout=10)
            return
        status = self.handle.status_r
        if status is not None:
            select.select([status], [], [], 10.0)


def _members_stat(sid: int) -> list[list[str]]:
    """/proc/PID/stat fields (from the state on) of every live process of the session."""
    return _stats_in_session(sid, [pid for pid, _ in session_members(sid)])


def _stats_in_session(sid: int, pids: list[int]) -> list[list[str]]:
    """/proc/PID/stat fields of those of `pids` still alive in session `sid` (a pid the kernel
    reused for another process is not a member)."""
    found = []
    for pid in pids:
        fields = stat_fields(str(pid))
        if fields and int(fields[3]) == sid and fields[0] != "Z":
            found.append(fields)
    return found


def _result(raw: bytes, reason: str, session: RunnerSession) -> SandboxResult:
    common = {"wall_s": time.monotonic() - session.started, "warm": session.handle.warm,
              "stderr_tail": session._stderr.decode(errors="replace")}
    if reason:
        return SandboxResult(False, reason=reason, message=f"runner session ended: {reason}", **common)  # type: ignore[arg-type]
    try:
        doc = json.loads(raw) if raw else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return SandboxResult(False, reason="no_result", message="the runner ended without a result", **common)  # type: ignore[arg-type]
    if doc.get("ok"):
        return SandboxResult(True, value=doc.get("value"), network_isolated=doc.get("network_isolated"), **common)  # type: ignore[arg-type]
    return replace(SandboxResult(False, **common),  # type: ignore[arg-type]
                   reason=str(doc.get("reason", "error")), message=str(doc.get("message", "")))
