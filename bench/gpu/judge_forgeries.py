"""The judge against forged verdicts on a GPU: `python -m bench.gpu.judge_forgeries [--out DIR]`.

Each forgery of tests/unit/evaluate/adversarial/forgery/ (a candidate, or a problem module, that
rewrites from inside its own process the serializer, the Verdict class, the comparison
functions, the output files) is checked with `evaluate_candidate` on the node's device (CUDA
on a GPU node) with the static checks off, next to the honest original. A forgery is caught
when its verdict is not `correct`; `max_abs_err` is the judge's own figure. Prints one row per
case and writes DIR/judge_forgeries.json. Runs in about a minute on one GPU.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from kernelband.evaluate import evaluate_candidate
from kernelband.sandbox import load_problem_sandboxed, shutdown_pool

ROOT = Path(__file__).resolve().parents[2]
FORGERY = ROOT / "tests" / "unit" / "evaluate" / "adversarial" / "forgery"
CANDIDATES = ("forge_json_serializer", "forge_verdict_class", "forge_compare_functions",
              "forge_outputs_index", "forge_pickle_payload")
PROBLEMS = ("problem_forges_its_runners", "problem_pickles_its_outputs")


def _row(name: str, problem: Any, editable: str | None, device: str | None) -> dict[str, Any]:
    start = time.perf_counter()
    verdict = evaluate_candidate(problem, editable, held_out=True, seeds=3, device=device,
                                 static_checks=False)
    return {"case": name, "correct": verdict.correct, "reason": verdict.reason,
            "max_abs_err": verdict.details.get("max_abs_err"), "wall_s": round(time.perf_counter() - start, 2),
            "message": verdict.message[:160]}


def run(device: str | None) -> list[dict[str, Any]]:
    vector_add = load_problem_sandboxed((ROOT / "examples" / "vector_add.py").read_text(), "native", "vector_add")
    rows = [_row("original (honest)", vector_add, None, device)]
    rows += [_row(name, vector_add, (FORGERY / f"{name}.py").read_text(), device) for name in CANDIDATES]
    for name in PROBLEMS:
        problem = load_problem_sandboxed((FORGERY / f"{name}.py").read_text(), "native", name)
        zeros = problem.editable.replace("x + y, mask=mask)", "x * 0.0, mask=mask)")
        rows += [_row(f"{name}: original", problem, None, device),
                 _row(f"{name}: zeros candidate", problem, zeros, device)]
    shutdown_pool()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "gpu" / "runs" / "judge-forgeries")
    parser.add_argument("--device", default=None, help="default: the node's device (cuda on a GPU node)")
    args = parser.parse_args()
    rows = run(args.device)
    print("| case | correct | reason | judge's max_abs_err | wall s |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['case']} | {r['correct']} | {r['reason']} | {r['max_abs_err']} | {r['wall_s']} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "judge_forgeries.json").write_text(json.dumps({"label": "measured", "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
