"""The warm pool: a process with torch and triton imported that forks one child per run.

Protocol over a SOCK_SEQPACKET socket pair: the parent sends `{"request": PATH}` with three
descriptors (result, stderr, status pipes' write ends); the zygote forks, answers
`{"pid": N}`, and when the child ends writes `{"status": waitstatus}` on the status pipe.
The zygote never runs untrusted code itself and never initialises CUDA.

Jailed (`KERNELBAND_ZYGOTE_JAILED=UID:GID`, started inside bubblewrap by the pool): each forked run
takes its own mount, pid and user namespaces first (kernelband/sandbox/forkjail.py), and the
child sends the `{"pid": N}` answer itself: the parent reads the sender's credentials, which the
kernel gives in the parent's pid namespace (the number it watches and kills).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys

from kernelband.sandbox import forkjail, jail
from kernelband.sandbox.child import read_request, run_request
from kernelband.sandbox.pool import JAILED_ENV, NCU_LAUNCHED_ENV

PRELOAD = ("torch", "triton", "numpy")
RESULT_FD: int | None = None  # in a forked child: the pipe its result goes to


def _child(sock: socket.socket, wake: tuple[int, int], path: str, fds: list[int],
           others: list[int]) -> None:
    global RESULT_FD
    result_fd, stderr_fd, status_fd = fds
    os.setsid()  # its own session and process group: the parent kills them as one
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if os.environ.get(JAILED_ENV):
        sock.send(json.dumps({"pid": os.getpid()}).encode())  # carries this child's credentials
    sock.close()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stderr_fd, 1)
    os.dup2(stderr_fd, 2)
    # other runs' pipes must not be reachable from this child
    if os.environ.get(NCU_LAUNCHED_ENV) == "1":
        # ncu's injected library keeps connections of its own, which a profiled process needs:
        # close exactly this zygote's descriptors instead of everything
        for fd in {*wake, *others, devnull, stderr_fd, status_fd}:
            with contextlib.suppress(OSError):
                os.close(fd)
    else:
        keep = sorted({0, 1, 2, result_fd})
        for low, high in zip(keep, keep[1:] + [65536], strict=False):
            os.closerange(low + 1, high)
    RESULT_FD = result_fd
    if os.environ.get(JAILED_ENV):
        _use_run_cache(path)
        _enter_run_jail(path, os.environ[JAILED_ENV])
    run_request(read_request(path), result_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _use_run_cache(request_path: str) -> None:
    """The run's own Triton cache (its job's), named by its request: the one cache folder its
    jail binds back (the zygote's own is the shared one)."""
    try:
        with open(request_path, encoding="utf-8") as f:
            cache = json.load(f).get("triton_cache")
    except (OSError, ValueError):
        return  # the request is read again by the run, which reports what is wrong with it
    if isinstance(cache, str) and cache:
        os.environ["TRITON_CACHE_DIR"] = cache


def _enter_run_jail(request_path: str, ids: str) -> None:
    """This run's own namespaces, as UID:GID; a run that cannot have them ends before any code
    runs."""
    try:
        uid, gid = (int(part) for part in ids.split(":"))
        cache = os.environ.get("TRITON_CACHE_DIR", "")
        keep = ((cache,) if os.path.isdir(cache) else ()) + jail.runtime_paths_under()
        forkjail.enter(os.path.dirname(request_path), (uid, gid), keep)
    except BaseException as exc:  # noqa: BLE001 - never run the request unjailed
        os.write(2, f"run jail could not be set up: {exc}\n".encode(errors="replace"))
        os._exit(70)


def _run_jail_problem() -> str:
    """"" when a forked run can take its own namespaces here, else why not: tried once at
    start, so a runtime that refuses them (a nested /proc mount, say) costs no run."""
    import tempfile

    workdir = tempfile.mkdtemp(prefix="kb-zygote-check-", dir=os.getcwd())  # the runs folder
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(write_end, 2)
        _enter_run_jail(os.path.join(workdir, ".request.json"), os.environ[JAILED_ENV])
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as err:
        why = err.read().decode(errors="replace").strip()
    os.rmdir(workdir)
    return "" if os.waitstatus_to_exitcode(status) == 0 else (why or f"wait status {status}")


def _reap(status_fds: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status_fds.pop(pid, None)
        if fd is not None:
            os.write(fd, json.dumps({"status": status}).encode())
            os.close(fd)


def _kill_runs(status_fds: dict[int, int]) -> None:
    """SIGKILL every child still running, with its process group (each child leads its own)."""
    for pid in status_fds:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    _reap(status_fds)


def serve(sock: socket.socket) -> None:
    """Fork a confined child per request until the parent closes the socket."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status_fds: dict[int, int] = {}
    problem = _run_jail_problem() if os.environ.get(JAILED_ENV) else ""
    sock.send(json.dumps({"ready": not problem, "why": problem}).encode())
    if problem:
        return
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(status_fds)
        if sock.fileno() in readable:
            msg, fds, _, _ = socket.recv_fds(sock, 65536, 3)
            if not msg:  # the parent is gone (killed, too): nothing would collect its runs
                _kill_runs(status_fds)
                return
            pid = os.fork()
            if pid == 0:
                _child(sock, (wake_r, wake_w), json.loads(msg)["request"], fds,
                       list(status_fds.values()))
            os.close(fds[0])
            os.close(fds[1])
            status_fds[pid] = fds[2]
            if not os.environ.get(JAILED_ENV):  # jailed, the child answers itself
                sock.send(json.dumps({"pid": pid}).encode())
            _reap(status_fds)


def _connect(where: str) -> socket.socket:
    """An inherited descriptor number, or `unix:PATH` (used when a launcher sits in between)."""
    if where.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(where.removeprefix("unix:"))
        return sock
    return socket.socket(fileno=int(where))


def main() -> None:
    """`python -m kernelband.sandbox.zygote SOCKET_FD|unix:PATH [MODULE ...]`."""
    # run with -m this module is __main__; an import of it in a run (ncu_pass reads RESULT_FD)
    # must find this one, not a fresh copy
    sys.modules.setdefault("kernelband.sandbox.zygote", sys.modules[__name__])
    for name in PRELOAD + tuple(sys.argv[2:]):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            print(f"zygote: preloading {name} failed: {exc}", file=sys.stderr)
    serve(_connect(sys.argv[1]))


if __name__ == "__main__":
    main()
