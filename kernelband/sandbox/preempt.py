"""Timed rounds that pause the GPU's other sandboxed work instead of waiting for it to end.

A shared GPU turn (a correctness check, a runner's start and first inputs, a problem's load)
can last seconds, mostly compiling on the CPU. Waiting for every such turn to end before a
measurement's timed rounds, with no new one starting meanwhile, leaves the GPU idle behind
the slowest of them. With preemption on (KERNELBAND_GPU_PREEMPT_SHARED) an exclusive turn
stops every other sandboxed process group on its GPU with SIGSTOP, lets their queued GPU work
drain, times its own runners, and starts them again with SIGCONT: nothing they started runs
during the timed rounds, and their work continues where it stopped.

Every sandbox child on a GPU node is listed while it lives (`arrive`/`leave`: a file per
process group under `_groups_dir`). The state of a preemption (who holds it, what it stopped,
what arrived meanwhile) is a JSON file beside it, changed only under one `flock`, so a child
started or resumed by another thread or worker process during the timed rounds stays stopped
until they end (`arrive`, `resume_group`). If the holder dies, the next turn on the GPU finds
its state file and starts what it stopped (`recover`). The seconds a group spent stopped are
kept (`stopped_s`): its supervisor's wall limits do not count them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelband.sandbox.device import detect_device
from kernelband.sandbox.settings import node_settings
from kernelband.sandbox.watch import stat_fields


def enabled() -> bool:
    """Whether this node's sandbox children are listed (a GPU node with the setting on)."""
    return detect_device().startswith("cuda") and node_settings().gpu_preempt_shared


SETTLE_S = 0.1  # after the stop: GPU work the stopped groups had queued finishes meanwhile
STOP_WAIT_S = 0.1  # SIGSTOP is delivered asynchronously: how long to wait for a group to stop


def gpu_key() -> str:
    """The GPU a node's files are kept for: the first one this process sees."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"


def _groups_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"kernelband-gpu-{gpu_key()}-groups"


def _state_path() -> Path:
    return Path(tempfile.gettempdir()) / f"kernelband-gpu-{gpu_key()}-preempt.json"


@contextmanager
def _locked() -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / f"kernelband-gpu-{gpu_key()}-preempt.lock"
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks ("" if gone): a pid the kernel reused has another."""
    fields = stat_fields(str(pid))
    return fields[19] if fields else ""


def _state(pid: int) -> str:
    fields = stat_fields(str(pid))
    return fields[0] if fields else ""


def _signal(pid: int, sig: signal.Signals) -> None:
    """The group, and its leader by pid (a child forked a moment ago may not lead a group yet)."""
    for send in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            send(pid, sig)


State = dict[str, Any]  # {"own": [pid, ...], "since": {"pid": monotonic seconds it was stopped at}}


def _read() -> State | None:
    try:
        value = json.loads(_state_path().read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _write(state: State | None) -> None:
    path = _state_path()
    if state is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def _credit(pid: int, seconds: float) -> None:
    """Add to the seconds `pid` spent stopped by preemption (its supervisor's deadlines move)."""
    path = _groups_dir() / f"{pid}.stopped"
    if (_groups_dir() / str(pid)).exists():
        path.write_text(str(_credited(pid) + max(0.0, seconds)))


def stopped_s(pid: int) -> float:
    """Seconds the group `pid` has spent stopped by other measurements' timed rounds so far, a
    stop still going on included: time its wall limits do not count."""
    state = _read() if _state_path().exists() else None
    since = (state or {}).get("since", {}).get(str(pid))
    ongoing = time.monotonic() - float(since) if since is not None else 0.0
    return _credited(pid) + ongoing


def _credited(pid: int) -> float:
    try:
        return float((_groups_dir() / f"{pid}.stopped").read_text())
    except (OSError, ValueError):
        return 0.0


def arrive(pid: int) -> None:
    """List a sandbox child just started on this GPU; stopped at once while timed rounds run."""
    folder = _groups_dir()
    folder.mkdir(exist_ok=True)
    with _locked():
        (folder / str(pid)).write_text(_start_time(pid))
        state = _read()
        if state is not None and pid not in state["own"]:
            _signal(pid, signal.SIGSTOP)
            state["since"][str(pid)] = time.monotonic()
            _write(state)
            _wait_stopped([pid])


def leave(pid: int) -> None:
    """The child has ended: no longer listed."""
    for name in (str(pid), f"{pid}.stopped"):
        (_groups_dir() / name).unlink(missing_ok=True)


def resume_group(pid: int) -> None:
    """SIGCONT for a runner its judge paused, unless another measurement's timed rounds are
    running: then it starts again when they end. (Without preemption on the node there is never
    a state file, and this is the plain SIGCONT.)"""
    if _state_path().exists():
        with _locked():
            state = _read()
            if state is not None and pid not in state["own"]:
                state["since"].setdefault(str(pid), time.monotonic())
                _write(state)
                return
    _signal(pid, signal.SIGCONT)


def pause_group(pid: int) -> None:
    """SIGSTOP from the runner's own judge: it stays stopped when timed rounds that stopped it end."""
    if _state_path().exists():
        with _locked():
            state = _read()
            if state is not None and str(pid) in state["since"]:
                _credit(pid, time.monotonic() - state["since"].pop(str(pid)))
                _write(state)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGSTOP)


def _listed() -> list[int]:
    """Listed groups still alive as the processes they were (a reused pid is not ours)."""
    folder = _groups_dir()
    alive = []
    for entry in folder.iterdir() if folder.exists() else ():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        with contextlib.suppress(OSError):
            if _start_time(pid) and _start_time(pid) == entry.read_text():
                alive.append(pid)
                continue
            leave(pid)
    return alive


def _wait_stopped(pids: list[int]) -> None:
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline and any(_state(pid) not in ("T", "t", "") for pid in pids):
        time.sleep(0.001)


def _end(state: State | None) -> None:
    """Start again every group the state stopped, crediting each with the time it was stopped
    (called under the lock, with the state file already removed)."""
    now = time.monotonic()
    for pid, since in (state or {}).get("since", {}).items():
        _credit(int(pid), now - float(since))
        _signal(int(pid), signal.SIGCONT)


def recover() -> None:
    """A holder that died during its timed rounds left its state: start what it stopped. Called
    by a turn that got the GPU's queue, which a live holder keeps until it has resumed them."""
    if not _state_path().exists():
        return
    with _locked():
        state = _read()
        _write(None)
        _end(state)


@contextmanager
def preempting(own: Iterable[int], settle_s: float = SETTLE_S) -> Iterator[int]:
    """Stop every other listed group on this GPU for the block (the caller holds the GPU's
    queue, so no turn starts meanwhile); yields how many were stopped. Groups already stopped
    (a runner its judge paused) are left as they are."""
    mine = sorted(set(own))
    with _locked():
        stopped = [pid for pid in _listed() if pid not in mine and _state(pid) not in ("T", "t")]
        now = time.monotonic()
        _write({"holder": os.getpid(), "own": mine, "since": {str(pid): now for pid in stopped}})
        for pid in stopped:
            _signal(pid, signal.SIGSTOP)
    try:
        _wait_stopped(stopped)
        if stopped:
            time.sleep(settle_s)
        yield len(stopped)
    finally:
        with _locked():
            state = _read() or {"since": {str(pid): now for pid in stopped}}  # a state file removed by hand
            _write(None)
            _end(state)
