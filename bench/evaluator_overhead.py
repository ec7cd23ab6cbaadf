"""Per-candidate evaluator overhead, cold (fresh interpreter) vs warm (zygote fork), per example.

overhead = wall time of evaluate_candidate - time spent inside the reference and candidate calls
(sandbox start, imports, problem load, comparisons and checks). Measured on this machine's CPU
under the Triton interpreter; writes bench/results/evaluator_overhead.json. `original` checks the
problem's own kernel (editable None); `candidate` passes the original region as a candidate, the
path every generated child takes (warm only): with the references the original's check kept, and
as the problem's first candidate (references cleared: a runner of the original starts too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.references import STORE
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, run_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3


def _run_s(details: dict[str, Any]) -> float:
    """Seconds inside the reference and candidate calls, as the runners reported them."""
    reported = details.get("runner_reported") or {}
    return float(reported["run_s"]) if "run_s" in reported else float(details["run_s"])


def _overhead(problem: KernelProblem, warm: bool, editable: str | None = None,
              fresh_references: bool = False) -> list[float]:
    values = []
    for _ in range(REPEATS):
        if fresh_references:  # the problem's first candidate in this process: no kept references
            STORE.clear()
        start = time.perf_counter()
        v = evaluate_candidate(problem, editable, seeds=1, device="cpu", limits=SandboxLimits(warm=warm))
        wall = time.perf_counter() - start
        assert v.correct, v.message
        values.append(wall - _run_s(v.details))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an earlier run's JSON, shown beside this one")
    parser.add_argument("--before-note", default="", help="what the earlier run measured")
    args = parser.parse_args()
    start = time.perf_counter()
    run_sandboxed("kernelband.sandbox.probes:echo", {}, SandboxLimits(warm=True, interpret=True))
    zygote_start_s = time.perf_counter() - start
    rows = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        problem = load_problem_sandboxed(path.read_text(), "native", path.stem)
        cold, warm = _overhead(problem, warm=False), _overhead(problem, warm=True)
        candidate = _overhead(problem, warm=True, editable=problem.editable)
        first = _overhead(problem, warm=True, editable=problem.editable, fresh_references=True)
        rows.append({"problem": path.stem, "cold_overhead_s": statistics.median(cold),
                     "warm_overhead_s": statistics.median(warm),
                     "warm_candidate_overhead_s": statistics.median(candidate),
                     "warm_first_candidate_overhead_s": statistics.median(first),
                     "cold_all": cold, "warm_all": warm, "warm_candidate_all": candidate,
                     "warm_first_candidate_all": first})
    shutdown_pool()
    print(f"zygote start (once per process): {zygote_start_s:.2f} s; median of {REPEATS} runs, seeds=1, public cases")
    print("| problem | cold overhead s | warm overhead s | warm candidate overhead s | warm first "
          "candidate overhead s |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['problem']} | {r['cold_overhead_s']:.3f} | {r['warm_overhead_s']:.3f} "
              f"| {r['warm_candidate_overhead_s']:.3f} | {r['warm_first_candidate_overhead_s']:.3f} |")
    out = {"label": "measured", "device": "cpu (Triton interpreter)", "repeats": REPEATS,
           "zygote_start_s": zygote_start_s, "rows": rows}
    if args.before:
        out["before"] = {**json.loads(args.before.read_text()), "note": args.before_note}
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results" / "evaluator_overhead.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
