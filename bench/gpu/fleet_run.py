"""One fleet run: deploy, submit the suite, watch it (snapshot, kill -9), gather the records.

The node runs N measuring workers (one per GPU, `gpu<i>@%h`); N = 1 is the one-GPU deployment.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from bench.gpu import fleet_records as db
from bench.gpu.fleet_checks import (
    aggregate_stages,
    busy_by_worker,
    busy_share,
    integrity,
    kill_outcome,
    rate,
)
from bench.gpu.fleet_deploy import (
    REPO,
    WorkerSpec,
    base_env,
    measure_queue,
    measuring_specs,
    migrate_and_token,
    start_api,
    start_scheduler,
    start_worker,
    worker_specs,
)
from bench.gpu.fleet_servers import (
    Child,
    Servers,
    alive_pids,
    kill_pids,
    start_child,
    start_servers,
)
from bench.gpu.fleet_snapshot import capture
from kernelband.db.session import make_engine

RESERVE_S = 50.0  # kept at the end for the records, the report and stopping everything
POLL_S = 0.5


@dataclass
class Plan:
    target: str
    problem_files: list[Path]
    problems_dir: Path
    budget: int
    parallel: int
    out: Path
    workdir: Path
    wheels: Path | None
    deadline: float  # time.monotonic() by which everything must be done
    kill: bool = True
    kill_after: int = 3
    cpu_concurrency: int = 1
    lease_s: float = 30.0
    pg_user: str = "nobody"
    gpus: int = 1  # measuring workers, one per GPU
    llm_concurrency: int = 2


@dataclass
class Watch:
    """What the watch loop has done so far."""

    submitted: float = 0.0
    snapshot_taken: bool = False
    kill: dict[str, Any] = field(default_factory=dict)
    deadline_hit: bool = False
    last_progress: float = 0.0


class Fleet:
    """The processes of one run and what they produced; `results` is filled as it goes."""

    def __init__(self, plan: Plan, results: dict[str, Any]) -> None:
        self.plan, self.results = plan, results
        self.log_dir = plan.workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.servers: Servers | None = None
        self.children: dict[str, Child] = {}
        self.orphans: list[int] = []
        self.engine: Engine | None = None
        self.api_url = ""
        self.token = ""
        self.suite_id: str | None = None
        self.job_ids: list[int] = []
        self.specs = {s.name: s for s in worker_specs(plan.target, plan.cpu_concurrency,
                                                      plan.llm_concurrency, plan.gpus)}
        self.measuring = {_node_prefix(s.node): s for s in measuring_specs(
            list(self.specs.values()), plan.target)}
        self.queue = measure_queue(plan.target)
        self.watch = Watch()
        self._snapshot_by = float("inf")
        self.worker_env: dict[str, str] = {}
        self.db_env: dict[str, str] = {}
        self.t0 = time.time()
        results.update(target=plan.target, measure_queue=self.queue, budget=plan.budget,
                       parallel=plan.parallel, problems=[p.stem for p in plan.problem_files],
                       problems_dir=str(plan.problems_dir), gpus=plan.gpus,
                       worker_plan={s.name: _describe(s) for s in self.specs.values()},
                       timeline=[])

    def mark(self, what: str, **data: Any) -> None:
        """A timeline entry (seconds since the run started) and a progress line."""
        entry = {"t_s": round(time.time() - self.t0, 2), "what": what, **data}
        self.results["timeline"].append(entry)
        print(f"[{entry['t_s']:7.1f}s] {what}" + (f" {data}" if data else ""), flush=True)

    # --- deploy -----------------------------------------------------------------------------
    def deploy(self) -> None:
        p = self.plan
        self.servers = start_servers(p.workdir, self.log_dir, p.wheels, p.pg_user)
        self.mark("postgres and redis up", database=self.servers.database_url,
                  redis=self.servers.redis_url)
        # A temp folder of this run's own: the sandbox's Triton cache lives under it, so every
        # run of a sweep starts as cold as the first instead of reusing its compiled kernels.
        tmp = p.workdir / "tmp"
        tmp.mkdir(exist_ok=True)
        common = {"KERNELBAND_LEASE_S": str(p.lease_s), "KERNELBAND_HEARTBEAT_INTERVAL_S": "5",
                  "TMPDIR": str(tmp)}
        self.worker_env = base_env(self.servers.redis_url, common)
        self.db_env = {**self.worker_env, "KERNELBAND_DATABASE_URL": self.servers.database_url}
        self.token = migrate_and_token(self.db_env, "fleet")
        self.mark("migrated; team token created")
        api, self.api_url = start_api(self.db_env, self.log_dir)
        self.children["api"] = api
        self.children["scheduler"] = start_scheduler(self.db_env, self.log_dir)
        for spec in self.specs.values():
            self.children[spec.name] = start_worker(spec, self.worker_env, self.log_dir)
        self.engine = make_engine(self.servers.database_url)
        self._wait_workers()
        self.mark("api, scheduler and workers up", api=self.api_url,
                  workers={s.name: _describe(s) for s in self.specs.values()})

    def _wait_workers(self, timeout_s: float = 90.0) -> None:
        """Until every worker's first heartbeat reached the workers table."""
        assert self.engine is not None
        deadline = time.monotonic() + timeout_s
        wanted = {_node_prefix(s.node) for s in self.specs.values()}
        while time.monotonic() < deadline:
            if wanted <= {_node_prefix(w["name"]) for w in db.workers(self.engine)}:
                return
            dead = [n for n, c in self.children.items() if not c.alive()]
            if dead:
                raise RuntimeError(f"{dead} exited at start: {self.children[dead[0]].log_tail()}")
            time.sleep(0.5)
        self.mark("warning: not every worker sent a heartbeat in time")

    # --- the suite --------------------------------------------------------------------------
    def submit(self) -> None:
        """`kernelband suite DIR --server URL` as a child; it waits until the suite finished."""
        p = self.plan
        folder = p.workdir / f"fleet-{p.target}"  # the suite's name on the dashboard
        folder.mkdir()
        for path in p.problem_files:
            shutil.copy(path, folder / path.name)
        args = [str(folder), "--server", self.api_url, "--format", "tritonbench",
                "--target", p.target, "--budget", str(p.budget), "--parallel", str(p.parallel),
                "--json", str(p.out / "suite.json")]
        self.results["suite_command"] = "kernelband suite " + " ".join(args) + \
            " --token $KERNELBAND_TOKEN"
        env = {**self.db_env, "KERNELBAND_TOKEN": self.token}
        env.pop("KERNELBAND_DATABASE_URL")
        self.watch.submitted = time.time()
        # at the latest a third of the way from submission to the suite's time limit
        self._snapshot_by = time.monotonic() + (p.deadline - RESERVE_S - time.monotonic()) / 3
        self.children["suite"] = start_child("suite-cli", [sys.executable, "-m", "kernelband.cli",
                                                           "suite", *args], env, self.log_dir,
                                             cwd=REPO)
        self.mark("suite submitted", problems=len(p.problem_files))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=30,
                            headers={"Authorization": f"Bearer {self.token}"})

    def watch_loop(self) -> None:
        assert self.engine is not None
        suite = self.children["suite"]
        while suite.alive():
            if time.monotonic() > self.plan.deadline - RESERVE_S:
                self.watch.deadline_hit = True
                self.mark("time limit: stopping the suite client before every job finished")
                suite.stop()
                break
            self._observe()
            time.sleep(POLL_S)
        self.results["suite_cli_exit"] = suite.popen.returncode
        self.mark("suite client exited", code=suite.popen.returncode)

    def _observe(self) -> None:
        assert self.engine is not None
        if self.suite_id is None:
            self.suite_id = db.latest_suite_id(self.engine)
            if self.suite_id is None:
                return
            self.results["suite_id"] = self.suite_id
        self.job_ids = db.suite_job_ids(self.engine, self.suite_id)
        rows = db.attempts(self.engine, self.job_ids)
        measured = sum(1 for a in rows if a.queue == self.queue and a.kind == "profile"
                       and a.state == "done")
        expected = len(self.job_ids) * (self.plan.budget + 1)
        if time.time() - self.watch.last_progress > 10:
            self.watch.last_progress = time.time()
            open_now = sum(a.state in ("pending", "dispatched", "expired") for a in rows)
            self.mark("progress", jobs=len(self.job_ids), profiles_done=measured,
                      attempts_open=open_now)
        if self.plan.kill and not self.watch.kill and measured >= self.plan.kill_after:
            self._maybe_kill()
        kill = self.watch.kill
        if kill and "survivors_after_10s" not in kill and time.time() > kill["killed_at"] + 10:
            kill["survivors_after_10s"] = alive_pids(kill["survivors"])
        if not self.watch.snapshot_taken and measured >= 2 and (
                measured >= expected // 3 or time.monotonic() > self._snapshot_by):
            self.snapshot("snapshot-mid", "mid-run")

    # --- the crash --------------------------------------------------------------------------
    def _maybe_kill(self) -> None:
        assert self.engine is not None
        running = db.running_measurement(self.engine, self.queue)
        if running is None or running.started_at is None or time.time() - running.started_at < 0.3:
            return
        spec = self._holder(running.id)
        if spec is None:
            return
        worker = self.children[spec.name]
        family = [worker.popen.pid]
        killed_at = time.time()
        pids = worker.kill9()
        time.sleep(1.0)
        survivors = alive_pids([p for p in pids if p not in family])
        self.orphans += survivors
        self.watch.kill = {"attempt": running.id, "kind": running.kind, "worker": spec.node,
                           "tries_at_kill": running.tries, "started_at": running.started_at,
                           "killed_at": killed_at, "held_s": round(killed_at - running.started_at, 2),
                           "pids_killed": pids, "survivors": survivors}
        self.children[spec.name] = start_worker(spec, self.worker_env, self.log_dir,
                                                f"{spec.name}-restarted")
        self.watch.kill["restarted_at"] = time.time()
        self.mark("killed -9 the measuring worker mid-measurement and restarted it",
                  worker=spec.node, attempt=running.id, kind=running.kind,
                  held_s=self.watch.kill["held_s"], survivors=survivors)

    def _holder(self, attempt_id: int) -> WorkerSpec | None:
        """The measuring worker that runs `attempt_id`: the only one, or the one whose
        heartbeat names it (None until a heartbeat does)."""
        if len(self.measuring) == 1:
            return next(iter(self.measuring.values()))
        assert self.engine is not None
        name = db.worker_holding(self.engine, attempt_id)
        return self.measuring.get(_node_prefix(name)) if name else None

    # --- snapshots and records --------------------------------------------------------------
    def snapshot(self, name: str, moment: str) -> None:
        if not self.suite_id:
            return
        self.watch.snapshot_taken = True
        context = {"moment": moment, "t_s": round(time.time() - self.t0, 1),
                   "device": self.results["environment"].get("device"), "target": self.plan.target}
        try:
            with self.client() as client:
                manifest = capture(client, self.plan.out / name, self.suite_id, context)
            self.mark(f"dashboard {moment} snapshot saved", responses=len(manifest["responses"]))
        except Exception as exc:  # noqa: BLE001 - a failed snapshot must not end the run
            self.mark(f"dashboard {moment} snapshot failed: {exc}")

    def gather(self) -> None:
        """Integrity, kill outcome, rates, busy share and stages from the service's records."""
        if self.engine is None or not self.suite_id:
            return
        self.job_ids = db.suite_job_ids(self.engine, self.suite_id)
        records = db.read_records(self.engine, self.job_ids)
        self.results["integrity"] = integrity(records)
        self.results["deadline_hit"] = self.watch.deadline_hit
        kill = dict(self.watch.kill)
        if kill:
            kill["outcome"] = kill_outcome(records.attempts, kill["attempt"], kill["tries_at_kill"])
        self.results["kill"] = kill or {"skipped": "no kill (disabled or no measurement seen)"}
        ends = [a.finished_at for a in records.attempts if a.finished_at]
        end = max(ends) if ends else time.time()
        wall = end - self.watch.submitted
        pulls = len(records.pulls)
        self.results["workers"] = db.workers(self.engine)
        names = sorted(w["name"] for w in self.results["workers"]
                       if _node_prefix(w["name"]) in self.measuring)
        suite_window, active = (self.watch.submitted, end), _active(records, self.queue)
        self.results["metrics"] = {
            "wall_s": wall, "pulls": pulls, "pulls_per_s": rate(pulls, wall),
            "busy_share_suite": busy_share(records.attempts, self.queue, suite_window),
            "busy_share_active": busy_share(records.attempts, self.queue, active),
            "busy_by_worker_suite": busy_by_worker(records.attempts, self.queue, suite_window,
                                                   names, self.plan.gpus),
            "busy_by_worker_active": busy_by_worker(records.attempts, self.queue, active,
                                                    names, self.plan.gpus),
            "killed_try_s": kill.get("held_s")}
        self._stages()

    def _stages(self) -> None:
        per_job: dict[str, Any] = {}
        with self.client() as client:
            for job_id in self.job_ids:
                per_job[str(job_id)] = client.get(f"/v1/jobs/{job_id}/stages").json()
            suite = client.get(f"/v1/suites/{self.suite_id}").json()
        self.results["stages_per_job"] = per_job
        self.results["stages"] = aggregate_stages([v for v in per_job.values() if isinstance(v, list)])
        self.results["suite"] = {k: suite.get(k) for k in ("suite_id", "jobs", "jobs_finished",
                                                          "finished", "metrics", "load_failures")}
        (self.plan.out / "suite-api.json").write_text(json.dumps(suite, indent=2))

    # --- whole run --------------------------------------------------------------------------
    def run(self) -> None:
        self.deploy()
        self.submit()
        self.watch_loop()
        if not self.watch.snapshot_taken:
            self.snapshot("snapshot-mid", "after the suite client stopped (no mid-run mark reached)")
        self.snapshot("snapshot-end", "end")
        self.gather()

    def finish(self) -> None:
        """Stop every process started here (workers first, servers last), orphans included."""
        if "metrics" not in self.results:
            try:
                self.gather()
            except Exception as exc:  # noqa: BLE001
                self.results.setdefault("gather_error", f"{type(exc).__name__}: {exc}")
        order = ["suite"] + [n for n in self.children if n.startswith("worker")] + ["scheduler", "api"]
        stopped = {}
        for name in order:  # a worker's warm shutdown waits for its task: 5 s, then SIGKILL
            if name in self.children:
                stopped[name] = self.children[name].stop(timeout_s=5 if name != "api" else 10)
        self.results["orphans_alive_at_end"] = alive_pids(self.orphans)
        kill_pids(self.orphans)
        if self.engine is not None:
            self.engine.dispose()
        if self.servers is not None:
            self.servers.stop()
        self.results["exit_codes"] = stopped
        self.results["orphans_after_kill"] = self.orphans


def _node_prefix(node: str) -> str:
    """`gpu1` of `gpu1@%h` or `gpu1@host`: a worker's name without its host."""
    return node.split("@", 1)[0]


def _describe(spec: WorkerSpec) -> str:
    """The worker's command-line essentials and its pinned device, for the timeline."""
    device = spec.env.get("CUDA_VISIBLE_DEVICES")
    return f"-Q {spec.queues} -c {spec.concurrency} -n {spec.node}" + (
        f" CUDA_VISIBLE_DEVICES={device}" if device is not None else "")


def _active(records: Any, queue: str) -> tuple[float, float]:
    """From the first dispatch to the last finish of the measuring queue's attempts."""
    rows = [a for a in records.attempts if a.queue == queue and a.dispatched_at and a.finished_at]
    if not rows:
        return (0.0, 0.0)
    return (min(a.dispatched_at for a in rows), max(a.finished_at for a in rows))
