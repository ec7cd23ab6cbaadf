"""Sandbox children as an unprivileged user when the service itself runs as root.

A child of a root worker could read whatever root reads and is not bound by RLIMIT_NPROC. With
`KERNELBAND_SANDBOX_USER` set (for example `nobody`), each child, once its limits and network
namespace are in place, gives its private work dir and a Triton cache of its own to that user,
drops every supplementary group, takes the user's gid and uid, and sets no_new_privs so that no
setuid program can raise it again. The user must be able to read the Python installation and
the project: `unreadable_paths` is the probe the parent runs once to check that.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import stat
from typing import Any

PR_SET_NO_NEW_PRIVS = 38


class SandboxUserError(RuntimeError):
    """KERNELBAND_SANDBOX_USER names a user that cannot run sandbox children here."""


def drop_privileges(user: str, workdir: str) -> bool:
    """Become `user` for the rest of this (child) process; False when not running as root."""
    if not user or os.geteuid() != 0:
        return False
    entry = pwd.getpwnam(user)
    uid, gid = entry.pw_uid, entry.pw_gid
    cache = f"{os.environ.get('TRITON_CACHE_DIR') or os.path.join(workdir, 'triton')}-{uid}"
    _own_dir(cache, uid, gid)
    for root, dirs, files in os.walk(workdir):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)
    os.chown(workdir, uid, gid, follow_symlinks=False)
    os.environ["TRITON_CACHE_DIR"] = cache
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    return True


def _own_dir(path: str, uid: int, gid: int) -> None:
    """A directory owned by uid; refuses a link or another user's entry planted at `path`."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, uid):
        raise PermissionError(f"{path} is not a directory owned by root or uid {uid}; remove it")
    os.chown(path, uid, gid, follow_symlinks=False)


def probe_paths() -> list[str]:
    """Files a child must read: the standard library, site-packages and this project."""
    import importlib.util

    paths = [os.__file__, os.path.dirname(os.__file__), __file__]
    for module in ("torch", "triton", "numpy"):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            paths.append(spec.origin)
    return paths


def unreadable_paths(payload: dict[str, Any]) -> dict[str, Any]:
    """Probe target (runs in a child): which of payload["paths"] this user cannot read."""
    missing = []
    for path in payload["paths"]:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as f:
                    f.read(1)
        except OSError as exc:
            missing.append(f"{path} ({exc.strerror})")
    return {"uid": os.geteuid(), "gid": os.getegid(), "groups": os.getgroups(),
            "unreadable": missing}


def user_problem(user: str, result_ok: bool, value: Any, message: str) -> str:
    """The error text for a failed probe run, or "" when the user can run children."""
    if not result_ok:
        return (f"KERNELBAND_SANDBOX_USER={user}: a probe child could not run as that user "
                f"({message}); check that it can read the Python installation and the project, "
                "or unset KERNELBAND_SANDBOX_USER")
    if value["unreadable"]:
        return (f"KERNELBAND_SANDBOX_USER={user}: that user cannot read "
                f"{', '.join(value['unreadable'])}; install Python and the project where it can "
                "read them, or unset KERNELBAND_SANDBOX_USER")
    return ""


def known_user(user: str) -> None:
    """Refuse a user name this machine does not know, before any child starts."""
    try:
        pwd.getpwnam(user)
    except KeyError:
        raise SandboxUserError(
            f"KERNELBAND_SANDBOX_USER={user}: no such user on this machine; create it "
            "(useradd --system) or name an existing unprivileged user such as nobody") from None
