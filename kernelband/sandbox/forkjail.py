"""One run's own jail inside the jailed zygote: a forked run sees only its own work dir.

The zygote runs in a bubblewrap jail that binds the folder of every run's work dir, keeping
CAP_SYS_ADMIN inside its user namespace only. Each forked run (`enter`) then takes:

- a new mount namespace where empty tmpfs mounts cover `/tmp`, `/dev/shm` and that folder, and
  only its own work dir (and the node's Triton cache) are bound back at their paths;
- a new pid namespace with its own `/proc`: no other run, no zygote; new network and IPC
  namespaces (no loopback, no abstract socket shared with another run);
- a nested user namespace where it is the jail's uid (the zygote is uid 0 of its own), with no
  capabilities, so nothing it runs can undo those mounts.

Process chain (host view): zygote -> relay (the run's session leader, waits) -> pid 1 of the
run's namespace (mounts, then waits) -> the run itself. A run killed by a signal is reported as
killed by that signal, as on the unjailed path.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_BIND, MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV = 0x1000, 0x4000, 1 << 18, 0x2, 0x4
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
_CAP_VERSION_3 = 0x20080522
_SYS_CAPSET = 126  # x86_64
_SIGNALED = 128  # exit code 128 + N: the run was killed by signal N (as a shell reports it)
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"run jail: {what}: {os.strerror(errno)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                       flags, data.encode() if data else None), f"mount {target}")


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets; no setuid program can raise them again."""
    header = struct.pack("Ii", _CAP_VERSION_3, 0)
    data = ctypes.create_string_buffer(24)  # two zeroed __user_cap_data_struct
    _check(_libc.syscall(_SYS_CAPSET, ctypes.c_char_p(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _own_view(workdir: str, keep: tuple[str, ...]) -> None:
    """Cover /tmp, /dev/shm (torch's shared tensors) and the runs folder with empty tmpfs
    mounts; bind `workdir` and `keep` back; a fresh /proc."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in (workdir, *keep)}
    for cover in ("/tmp", "/dev/shm", os.path.dirname(workdir)):
        if os.path.isdir(cover):  # the runs folder is gone already when it lies under /tmp
            _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for path, fd in fds.items():
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV)


def _user_namespace(uid: int, gid: int) -> None:
    """A nested user namespace where this process is `uid`:`gid` (its only mapped ids) with no
    capability over the mounts above."""
    outer_uid, outer_gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(user)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {outer_uid} 1"),
                       ("gid_map", f"{gid} {outer_gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
            f.write(text)
    drop_capabilities()
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")  # its own /proc/self again


def _wait_code(pid: int) -> int:
    """Exit code of `pid`; killed by signal N -> 128 + N."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 1
        if os.WIFSIGNALED(status):
            return _SIGNALED + os.WTERMSIG(status)
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)


def _die_like(code: int) -> None:
    """End this relay as the run ended: by the same signal, or with the same exit code."""
    if code > _SIGNALED:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(code - _SIGNALED, signal.SIG_DFL)
            os.kill(os.getpid(), code - _SIGNALED)
    os._exit(code)


def enter(workdir: str, ids: tuple[int, int], keep: tuple[str, ...] = ()) -> None:
    """Called by a freshly forked zygote child: returns only in the jailed run process, as
    `ids` (uid, gid); the relay and the namespace's pid 1 never return."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "not dumpable")
    # its own network (loopback down) and IPC too: runs of one zygote share no channel
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC),
           "unshare(mount, pid, net, ipc)")
    init = os.fork()
    if init:
        _die_like(_wait_code(init))
    try:  # pid 1 of the run's pid namespace
        _own_view(workdir, keep)
        run = os.fork()
    except BaseException as exc:  # noqa: BLE001 - report and end; this process must not return
        os.write(2, f"run jail could not be set up: {exc}\n".encode(errors="replace"))
        os._exit(70)
    if run:
        drop_capabilities()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os._exit(_wait_code(run))
    _user_namespace(*ids)
