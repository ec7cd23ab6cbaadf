"""The distributed deployment on one node, as README's "Run on a GPU cluster" describes it.

Migrations (`kernelband migrate`), a team token (`kernelband tokens create`), the API under
uvicorn, one scheduler (`python -m services.scheduler`) and Celery workers: `llm`, and per GPU
one `cpu` worker and one measuring worker (`gpu.<target>` with `-c 1`), both with
`CUDA_VISIBLE_DEVICES` naming that GPU; the `cpu` target measures on `cpu`. Workers get the
broker only, never the database URL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.gpu.fleet_servers import Child, ServerStartError, free_port, start_child

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class WorkerSpec:
    """One Celery worker: log name, queues, concurrency, node name, extra environment."""

    name: str
    queues: str
    concurrency: int
    node: str
    env: dict[str, str] = field(default_factory=dict)

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
    """The queue whose worker measures for `target` (kernelband.scheduling.dispatch routes cpu to cpu)."""
    return "cpu" if target == "cpu" else f"gpu.{target}"


def worker_log_name(base: str, index: int) -> str:
    """`worker-measure` for the first GPU's worker, `worker-measure-1` for the second, ..."""
    return base if index == 0 else f"{base}-{index}"


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
    """llm worker, then per GPU i a `cpu` worker and a `-c 1` measuring worker `gpu<i>@%h`.

    A GPU node's compile pre-screen runs on the node's GPU, so each GPU gets its own `cpu`
    worker pinned to it: N GPUs get N times the pre-screen capacity, spread over the N GPUs.
    The `cpu` target measures on `cpu`: there the N workers compile and measure alike.
    """
    if gpus < 1:
        raise ValueError(f"gpus must be at least 1, not {gpus}")
    specs = [WorkerSpec("worker-llm", "llm", llm_concurrency, "llm@%h")]
    if target == "cpu":
        return [*specs, *(WorkerSpec(worker_log_name(MEASURE_WORKER, i), "cpu", cpu_concurrency,
                                     f"cpu{i}@%h") for i in range(gpus))]
    for i, device in enumerate(device_ids(gpus)):
        pinned = {"CUDA_VISIBLE_DEVICES": device}
        specs += [WorkerSpec(worker_log_name(CPU_WORKER, i), "cpu", cpu_concurrency,
                             f"cpu{i}@%h", pinned),
                  WorkerSpec(worker_log_name(MEASURE_WORKER, i), measure_queue(target), 1,
                             f"gpu{i}@%h", pinned)]
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


def start_api(db_env: dict[str, str], log_dir: Path, timeout_s: float = 60) -> tuple[Child, str]:
    """uvicorn serving the app factory on a free port; waits for /readyz."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "--factory", "services.api.app:create_app",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    child = start_child("api", argv, db_env, log_dir, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.alive():
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return child, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise ServerStartError(f"the API did not become ready on {url}: {child.log_tail()}")


def start_scheduler(db_env: dict[str, str], log_dir: Path) -> Child:
    argv = [sys.executable, "-m", "services.scheduler", "--name", "scheduler-1"]
    return start_child("scheduler", argv, db_env, log_dir, cwd=REPO)


def start_worker(spec: WorkerSpec, worker_env: dict[str, str], log_dir: Path,
                 log_name: str | None = None) -> Child:
    """A Celery worker; its environment never holds the database URL."""
    env = {k: v for k, v in {**worker_env, **spec.env, **NO_MULTICAST_ENV}.items()
           if k != "KERNELBAND_DATABASE_URL"}
    return start_child(log_name or spec.name, spec.argv(), env, log_dir, cwd=REPO)
