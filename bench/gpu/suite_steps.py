"""Where a suite pull's time goes on a GPU for TritonBench-G problems with a perf harness.

`kernelband suite --target h100` on corpus problems runs the same task bodies the workers run
(kernelband/scheduling/tasks.py). This script calls those bodies directly, one after the other,
for each named corpus problem, and prints the wall time of each with the timings the task
reports (check, static, measure, signature):

1. loading the problem in the sandbox (what the CLI does once per problem);
2. `profile` of the original (the first pull of every track);
3. `compile` of one rules-generator child (GPU pre-screen and static profile);
4. `profile` of that child, paired with the original, twice (the second with a warm cache).

With `--no-perf` the same runs happen without the harness (region calls timed instead).

    python -m bench.gpu.suite_steps --names attention_fwd_triton2,cache_transform_triton \
        --target h100 [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.gpu.corpus_gpu import corpus_root


def _timed(label: str, work: Any) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        value = work()
        error = ""
    except Exception as exc:  # a diagnostic: report and go on
        value, error = None, f"{type(exc).__name__}: {exc}"[:400]
    row: dict[str, Any] = {"step": label, "wall_s": round(time.perf_counter() - start, 2)}
    if isinstance(value, dict):
        row.update(ok=value.get("ok"), reason=value.get("reason"),
                   timings={k: round(v, 2) for k, v in (value.get("timings") or {}).items()},
                   method=(value.get("measurement") or {}).get("method"))
    if error:
        row["error"] = error
    print(json.dumps(row), flush=True)
    return row


def first_child(problem: Any, gpu: bool) -> tuple[str, str] | None:
    """A rules-generator rewrite of the original: (strategy, editable), or None."""
    from kernelband.generate.rules.generator import candidate_variants
    from kernelband.generate.rules.options import BUILDERS

    for strategy in BUILDERS:
        variants = candidate_variants(problem.editable, strategy, gpu_only=gpu)
        if variants:
            return strategy, variants[0][1]
    return None


def steps_for(name: str, root: Path, target: str, perf: bool) -> list[dict[str, Any]]:
    """The task bodies of one pull sequence for one corpus problem, each timed."""
    from kernelband.profile.perf_harness import with_perf_harness
    from kernelband.sandbox import load_problem_sandboxed
    from kernelband.scheduling import tasks

    source = (root / "tritonbench-g" / "kernels" / f"{name}.py").read_text()
    rows: list[dict[str, Any]] = []
    loaded: list[Any] = []
    rows.append(_timed(f"{name}: load", lambda: loaded.append(
        load_problem_sandboxed(source, "tritonbench", name))))
    if not loaded:
        return rows
    problem = loaded[0]
    harness = root / "tritonbench-g" / "perf" / f"{name}_perf.py"
    if perf and harness.is_file():
        problem = with_perf_harness(problem, harness.read_text())
    base = {"attempt_id": 0, "job_id": 0, "target": target, "problem": problem.to_dict()}
    rows.append(_timed(f"{name}: profile original", lambda: tasks.profile(
        {**base, "original": True, "editable": problem.editable, "hardware_signature": True})))
    child = first_child(problem, target != "cpu")
    if child is None:
        rows.append({"step": f"{name}: no rules rewrite applies"})
        print(json.dumps(rows[-1]), flush=True)
        return rows
    strategy, editable = child
    rows.append(_timed(f"{name}: compile child ({strategy})",
                       lambda: tasks.compile({**base, "editable": editable})))
    for run in ("first", "second"):
        rows.append(_timed(f"{name}: profile child ({run})", lambda: tasks.profile(
            {**base, "editable": editable, "parent_editable": problem.editable,
             "hardware_signature": True})))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--names", required=True, help="comma-separated corpus problem names")
    parser.add_argument("--target", default="h100")
    parser.add_argument("--no-perf", action="store_true", help="time region calls instead")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    root = corpus_root()
    rows = [row for name in args.names.split(",")
            for row in steps_for(name, root, args.target, not args.no_perf)]
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        suffix = "-noperf" if args.no_perf else ""
        (args.out / f"suite_steps{suffix}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
