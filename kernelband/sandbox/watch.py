"""Watch and kill a sandbox child's whole session through /proc (no cgroups needed)."""

from __future__ import annotations

import contextlib
import os
import signal

_PAGE = os.sysconf("SC_PAGE_SIZE")


def stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat after the command name (state first), or None for a process gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # the command name may hold spaces or parentheses: split after the last ')'
    return raw[raw.rfind(")") + 2 :].split()


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, rss_bytes) of every live process whose session id is `sid`."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = stat_fields(name)
        # fields[0] is the state (index 2 of stat); session is stat field 6, rss field 24
        if fields and int(fields[3]) == sid and fields[0] != "Z":
            members.append((int(name), int(fields[21]) * _PAGE))
    return members


def _pss_bytes(pid: int) -> int | None:
    """The proportional set size of `pid` (shared pages split among their sharers), or None
    when /proc does not show it."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def session_usage(sid: int) -> tuple[int, int]:
    """(process count, resident bytes) of the session.

    One process counts its RSS. Forked processes share their parent's pages copy-on-write, so
    their RSS summed would count those pages once per process (ten forks of a child that
    imported torch look like 2 GB); a session of several processes counts each one's
    proportional set size instead, falling back to RSS where /proc hides it."""
    members = session_members(sid)
    if len(members) <= 1:
        return len(members), sum(rss for _, rss in members)
    total = 0
    for pid, rss in members:
        pss = _pss_bytes(pid)
        total += rss if pss is None else pss
    return len(members), total


def kill_session(sid: int) -> None:
    """SIGKILL the process group and every straggler that kept the session id."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    for pid, _ in session_members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def signal_reason(sig: int) -> str:
    """`cpu_limit`, `file_size_limit` or `crashed:SIGSEGV` for a terminating signal."""
    if sig == signal.SIGXCPU:
        return "cpu_limit"
    if sig == signal.SIGXFSZ:
        return "file_size_limit"
    try:
        return f"crashed:{signal.Signals(sig).name}"
    except ValueError:
        return f"crashed:signal{sig}"
