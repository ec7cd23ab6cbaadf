"""`run_sandboxed`: run a trusted target in a confined child and supervise it to the end."""

from __future__ import annotations

import json
import logging
import math
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kernelband.sandbox import jail, pool, preempt, privileges
from kernelband.sandbox.limits import SandboxLimits, SandboxResult, triton_cache_dir
from kernelband.sandbox.watch import kill_session, session_usage, signal_reason

log = logging.getLogger(__name__)
STDERR_TAIL_BYTES = 4000
WATCH_INTERVAL_S = 0.05
_warned_network = False


@dataclass
class _Outputs:
    result: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    rss: int = 0  # the session's resident memory at the last watchdog look (for messages)
    too_large: bool = False


def _read_into(fd: int, handle: pool.ChildHandle, out: _Outputs, limits: SandboxLimits) -> bool:
    """Read one chunk; False at end of file."""
    try:
        chunk = os.read(fd, 1 << 20)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    if fd == handle.result_r:
        out.result += chunk
        out.too_large = out.too_large or len(out.result) > limits.max_result_bytes
    elif fd == handle.stderr_r:
        out.stderr = (out.stderr + chunk)[-STDERR_TAIL_BYTES:]
    else:
        out.status += chunk
    return True


def _exit_code(handle: pool.ChildHandle, out: _Outputs) -> int | None:
    """Popen-style return code (negative: signal), None while running."""
    if handle.popen is not None:
        code = handle.popen.poll()
        if handle.jailed and code is not None and code > 128:
            return 128 - code  # bwrap reports a command killed by signal N as 128 + N
        return code
    if out.status:
        return os.waitstatus_to_exitcode(int(json.loads(bytes(out.status))["status"]))
    return None


def _watch_reason(handle: pool.ChildHandle, limits: SandboxLimits, deadline: float,
                  out: _Outputs, listed: bool = False) -> str:
    # time another measurement's timed rounds kept the child stopped is not its own
    if time.monotonic() >= deadline and (not listed or time.monotonic() >= deadline + preempt.stopped_s(handle.pid)):
        return "timeout"
    nprocs, rss = session_usage(handle.pid)
    out.rss = max(out.rss, rss)
    # count first: forked children share pages, so their summed RSS overstates memory
    if nprocs > limits.max_procs:
        return "too_many_processes"
    if rss > limits.memory_bytes:
        return "memory_limit"
    return ""


def _supervise(handle: pool.ChildHandle, limits: SandboxLimits,
               listed: bool = False) -> tuple[int | None, str, _Outputs]:
    """Pump the pipes until the child ends or a limit is hit; returns (code, kill reason, out)."""
    out = _Outputs()
    sel = selectors.DefaultSelector()
    for fd in (handle.result_r, handle.stderr_r, handle.status_r):
        if fd is not None:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + limits.wall_s + limits.compile_s  # the child splits the two
    reason, code = "", None
    while code is None:
        for key, _ in sel.select(WATCH_INTERVAL_S):
            if not _read_into(int(key.fd), handle, out, limits):
                sel.unregister(key.fd)
        code = _exit_code(handle, out)
        reason = "result_too_large" if out.too_large else ""
        reason = reason or (_watch_reason(handle, limits, deadline, out, listed) if code is None else "")
        if reason:
            break
    kill_session(handle.pid)  # stragglers the child left behind die with it
    if code is None:
        code = _wait_killed(handle, sel, out, limits)
    for key in list(sel.get_map().values()):
        while _read_into(int(key.fd), handle, out, limits):
            if not _readable(key.fd):
                break
    sel.close()
    return code, reason, out


def _readable(fd: Any) -> bool:
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    ready = bool(sel.select(0))
    sel.close()
    return ready


def _wait_killed(
    handle: pool.ChildHandle, sel: selectors.BaseSelector, out: _Outputs, limits: SandboxLimits
) -> int | None:
    if handle.popen is not None:
        try:
            return handle.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None
    end = time.monotonic() + 10
    while not out.status and time.monotonic() < end and handle.status_r is not None:
        if _readable(handle.status_r):
            _read_into(handle.status_r, handle, out, limits)
        else:
            time.sleep(0.01)
    return _exit_code(handle, out)


def _interpret(code: int | None, reason: str, out: _Outputs, wall: float, warm: bool,
               budget_s: float = math.inf) -> SandboxResult:
    """The result (SandboxResult scrubs its message and stderr of the node's secrets)."""
    tail = out.stderr.decode(errors="replace")
    common = {"wall_s": wall, "stderr_tail": tail, "warm": warm}
    if reason:
        message = f"{_kill_message(reason)} (peak resident memory seen: {out.rss / 2**20:.0f} MiB)"
        return SandboxResult(False, reason=reason, message=message, **common)  # type: ignore[arg-type]
    doc: dict[str, Any] | None = None
    if out.result:
        try:
            doc = json.loads(bytes(out.result))
        except ValueError:
            doc = None
    if code is not None and -code == signal.SIGALRM and wall >= budget_s:
        # the run-budget timer (compile_budget) kills the child outright once code it ran has put
        # SIGALRM back to its default action: past the budget, that is running out of time
        return SandboxResult(False, reason="timeout", message=_kill_message("timeout"), **common)  # type: ignore[arg-type]
    if code is not None and code < 0:
        return SandboxResult(False, reason=signal_reason(-code), message="the sandbox child was killed by a signal", **common)  # type: ignore[arg-type]
    if not isinstance(doc, dict):
        why = f"exit:{code}" if code else "no_result"
        return SandboxResult(False, reason=why, message=f"the sandbox child ended ({why}) without a result", **common)  # type: ignore[arg-type]
    _warn_network(doc.get("network_isolated"))
    if doc.get("ok"):
        return SandboxResult(True, value=doc.get("value"), network_isolated=doc.get("network_isolated"), **common)  # type: ignore[arg-type]
    msg = f"{doc.get('message', '')}\n{doc.get('traceback', '')}".strip()
    return SandboxResult(False, reason=str(doc.get("reason", "error")), message=msg, **common)  # type: ignore[arg-type]


def _kill_message(reason: str) -> str:
    return {
        "timeout": "the run exceeded its wall-clock limit and was killed",
        "memory_limit": "the run exceeded its memory limit (resident set size) and was killed",
        "too_many_processes": "the run started too many processes and was killed",
        "result_too_large": "the run returned a result larger than allowed and was killed",
    }.get(reason, reason)


def _warn_network(isolated: Any) -> None:
    global _warned_network
    if isolated is False and not _warned_network:
        _warned_network = True
        log.warning("sandbox: could not create a private network namespace; children have network")


_user_checks: dict[str, str] = {}  # sandbox user -> "" (usable) or why not, once per process
_user_lock = threading.RLock()  # the probe run re-enters


def require_usable_user(limits: SandboxLimits) -> None:
    """Check once that `limits.user` can run children here; SandboxUserError says why not."""
    if not limits.user or os.geteuid() != 0:
        return
    with _user_lock:
        if limits.user not in _user_checks:
            privileges.known_user(limits.user)
            _user_checks[limits.user] = ""  # the probe below runs as that user itself
            probe = run_sandboxed("kernelband.sandbox.privileges:unreadable_paths",
                                  {"paths": privileges.probe_paths()},
                                  replace(limits, audit=False, wall_s=max(limits.wall_s, 30.0)))
            _user_checks[limits.user] = privileges.user_problem(
                limits.user, probe.ok, probe.value, probe.message or probe.reason)
            if _user_checks[limits.user]:
                log.error("sandbox: %s", _user_checks[limits.user])
    if _user_checks[limits.user]:
        raise privileges.SandboxUserError(_user_checks[limits.user])


def prepare_run(limits: SandboxLimits, prefix: str = "kb-sandbox-") -> tuple[bool, str]:
    """(jailed, a new work dir) for one run: every way of starting a runner calls this, writes
    `"jailed"` into its request, and passes both to `pool.spawn`. Raises SandboxJailError
    where the node must jail and cannot, SandboxUserError for an unusable sandbox user."""
    # Nsight Compute passes stay outside the jail: ncu's launch and attach sessions need the
    # host's view (docs/reliability.md); a node that must jail and cannot refuses them too
    jailed = jail.jailed(limits.isolation) and not limits.profiled
    if jailed and limits.user:
        privileges.known_user(limits.user)  # the jail binds the runtime: any user can run it
    elif not jailed:
        require_usable_user(limits)
    os.makedirs(triton_cache_dir(limits), mode=0o700, exist_ok=True)
    return jailed, tempfile.mkdtemp(prefix=prefix, dir=jail.runs_parent() if jailed else None)


def run_sandboxed(
    target: str, payload: dict[str, Any], limits: SandboxLimits | None = None, *,
    collect: Callable[[str], Any] | None = None,
) -> SandboxResult:
    """Run `target` ("module:function", dict -> JSON-able) in a confined child process.

    `collect(workdir)` runs in the caller after the child has ended and before its workdir is
    removed: how a judge reads the raw files a runner left there (outputs, samples); what it
    returns is the result's `collected`. It is not called when the child was killed.
    """
    limits = limits or SandboxLimits.from_settings()
    jailed, workdir = prepare_run(limits)
    request_path = os.path.join(workdir, ".request.json")
    with open(request_path, "w", encoding="utf-8") as f:
        json.dump({"target": target, "payload": payload, "limits": limits.to_dict(),
                   "workdir": workdir, "jailed": jailed, "triton_cache": triton_cache_dir(limits)}, f)
    start = time.monotonic()
    handle = pool.spawn(request_path, limits, workdir, jailed)
    # a jailed run on the interpreter has no GPU device (jail.gpu_in_jail): nothing it does
    # reaches the GPU, so other measurements' timed rounds let it go on compiling on the cores
    # the measuring runners are not pinned to
    reaches_gpu = not jailed or jail.gpu_in_jail(limits.interpret)
    listed = preempt.enabled() and reaches_gpu
    if listed:
        preempt.arrive(handle.pid)
    collected: Any = None
    try:
        code, reason, out = _supervise(handle, limits, listed)
        if collect is not None and not reason:
            collected = collect(workdir)
    finally:
        if listed:
            preempt.leave(handle.pid)
        for fd in (handle.result_r, handle.stderr_r, handle.status_r):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
    result = _interpret(code, reason, out, time.monotonic() - start, handle.warm, limits.wall_s)
    return replace(result, collected=collected) if collected is not None else result
