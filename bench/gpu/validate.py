"""GPU validation driver: `python -m bench.gpu.validate --all --out DIR` on a GPU machine, then
`python -m bench.gpu.validate --report --from DIR` (anywhere) for RESULTS.md and replay tables.

Each step runs alone with its flag (--env, --examples, --ncu, --optimize); each writes
DIR/<step>.json. Nothing here invents a number: a step that did not run is reported as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

GPU_STEPS = ("env", "examples", "ncu", "optimize")
# The order examples are optimised in when the deadline allows only a subset.
OPTIMIZE_ORDER = ("softmax", "rmsnorm", "row_sum", "vector_add", "swiglu", "cross_entropy", "matmul")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for step in GPU_STEPS:
        p.add_argument(f"--{step}", action="store_true", help=f"run the {step} step (GPU)")
    p.add_argument("--all", action="store_true", help="run every GPU step")
    p.add_argument("--report", action="store_true", help="write RESULTS.md + replay tables (CPU)")
    p.add_argument("--out", type=Path, default=Path("bench/gpu/out"), help="where step JSON goes")
    p.add_argument("--from", dest="source", type=Path, action="append", default=[],
                   help="step JSON folder(s) for --report (repeatable; later ones win per step)")
    p.add_argument("--only", default="", help="comma-separated example names (default: all)")
    p.add_argument("--policies", default="kernelband,random,ucb1", help="optimize policies")
    p.add_argument("--target", default="", help="KernelBand target (default: from the device)")
    p.add_argument("--budget", type=int, default=20, help="optimize iterations per job (T)")
    p.add_argument("--seeds", default="0", help="comma-separated optimize job seeds")
    p.add_argument("--scaled", action="store_true",
                   help="optimize scaled copies of the examples (bench/gpu/scaled.py)")
    p.add_argument("--scaled-from", type=Path, action="append", default=[],
                   help="scaled-run folder(s) for --report (a RESULTS.md section of their own)")
    p.add_argument("--scaled-replay", type=Path, default=Path("bench/gpu/replay/scaled.json"))
    p.add_argument("--deadline-s", type=float, default=480.0, help="optimize step time box")
    p.add_argument("--time-box-s", type=float, default=0.0,
                   help="whole run's time box; the optimize step gets what is left (0: no box)")
    p.add_argument("--work", type=Path, default=Path("/tmp/kb-gpu-validate"),
                   help="scratch folder (job databases, caches); never under --out")
    p.add_argument("--job-wall-s", type=float, default=90.0, help="wall budget of one job")
    p.add_argument("--path-file", action="store_true",
                   help="write a .pth so sandbox children import this checkout (bare GPU machine)")
    p.add_argument("--results", type=Path, default=Path("bench/gpu/RESULTS.md"))
    p.add_argument("--replay", type=Path, default=Path("bench/gpu/replay/measured.json"))
    args = p.parse_args(argv)
    if not (args.all or args.report or any(getattr(args, s) for s in GPU_STEPS)):
        p.error("choose --all, --report or at least one step flag (--env, --examples, --ncu, --optimize)")
    return args


def selected_examples(only: str, order: tuple[str, ...] = ()) -> list[Path]:
    """examples/*.py filtered by `only`, sorted by `order` first (names not in it last)."""
    from bench.gpu.examples_check import example_files

    paths = example_files()
    if only:
        wanted = {n.strip() for n in only.split(",") if n.strip()}
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            raise SystemExit(f"unknown example(s) {sorted(unknown)}; choose from "
                             f"{sorted(p.stem for p in paths)}")
        paths = [p for p in paths if p.stem in wanted]
    rank = {name: i for i, name in enumerate(order)}
    return sorted(paths, key=lambda p: (rank.get(p.stem, len(rank)), p.stem))


def _write(out: Path, step: str, data: Any) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{step}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")


def run_gpu_steps(args: argparse.Namespace, started: float) -> None:
    """The steps that need the GPU, each writing its JSON as soon as it is done."""
    from bench.gpu.environment import describe_environment, install_path_file, stub_missing_litellm

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("KERNELBAND_DATA_DIR", str(args.work / "kbdata"))
    stubbed = stub_missing_litellm()
    if args.path_file:
        install_path_file([str(Path.cwd()), *[p for p in sys.path if p.startswith("/tmp/site")]])
    steps = set(GPU_STEPS) if args.all else {s for s in GPU_STEPS if getattr(args, s)}
    env = describe_environment() | {"litellm_stubbed": stubbed}
    _write(args.out, "env", env)
    print(f"[env] {env.get('device')} torch {env['torch']} triton {env['triton']}", flush=True)
    paths = selected_examples(args.only)
    if "examples" in steps:
        from bench.gpu.examples_check import run_examples

        _write(args.out, "examples", run_examples(paths))
    if "ncu" in steps:
        from bench.gpu.ncu_step import run_ncu_step

        _write(args.out, "ncu", run_ncu_step(paths))
    if "optimize" in steps:
        from bench.gpu.environment import target_for_device
        from bench.gpu.optimize_step import run_optimize_step

        target = args.target or target_for_device(str(env.get("device", "")))
        ordered = selected_examples(args.only, OPTIMIZE_ORDER)
        deadline = args.deadline_s
        if args.time_box_s > 0:  # leave 20 s to write the JSON before the outer timeout
            deadline = min(deadline, args.time_box_s - (time.monotonic() - started) - 20)
        policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
        seeds = tuple(int(x) for x in args.seeds.split(",") if x.strip())
        jobs = run_optimize_step(ordered, target, args.budget, args.work / "jobs",
                                 deadline, args.job_wall_s, policies, seeds, args.scaled)
        _write(args.out, "optimize", jobs)


def main(argv: list[str] | None = None) -> None:
    """Run the chosen steps."""
    args = parse_args(argv)
    started = time.monotonic()
    if args.all or any(getattr(args, s) for s in GPU_STEPS):
        run_gpu_steps(args, started)
    if args.report:
        from bench.gpu.results import write_report

        write_report(args.source or [args.out], args.results, args.replay,
                     args.scaled_from, args.scaled_replay)
    print(f"[validate] done in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
