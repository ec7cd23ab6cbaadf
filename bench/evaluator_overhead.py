"""Per-candidate evaluator overhead, cold (fresh interpreter) vs warm (zygote fork), per example.

overhead = wall time of evaluate_candidate - time spent inside the reference and candidate calls
(sandbox start, imports, problem load, comparisons and checks). Measured on this machine's CPU
under the Triton interpreter; writes bench/results/evaluator_overhead.json and the
`evaluator-overhead` section of bench/RESULTS.md. `original` checks the problem's own kernel
(editable None); `candidate` passes the original region as a candidate, the path every generated
child takes (warm only): with the references the original's check kept, and as the problem's
first candidate (references cleared: a runner of the original starts too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bench.common import RESULTS_DIR, ROOT, fmt, machine_line, markdown_table, write_section
from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.references import STORE
from kernelband.problem import KernelProblem
from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, run_sandboxed, shutdown_pool

JSON_PATH = RESULTS_DIR / "evaluator_overhead.json"
REPEATS = 3
COLUMNS = (("cold_overhead_s", "cold overhead s"), ("warm_overhead_s", "warm overhead s (original)"),
           ("warm_candidate_overhead_s", "warm overhead s (candidate)"),
           ("warm_first_candidate_overhead_s", "warm overhead s (first candidate)"))


def _run_s(details: dict[str, Any]) -> float:
    """Seconds inside the reference and candidate calls, as the runners reported them."""
    reported = details.get("runner_reported") or {}
    return float(reported["run_s"]) if "run_s" in reported else float(details["run_s"])


def _overhead(problem: KernelProblem, warm: bool, editable: str | None = None,
              fresh_references: bool = False) -> float:
    """The median overhead of REPEATS evaluations."""
    values = []
    for _ in range(REPEATS):
        if fresh_references:  # the problem's first candidate in this process: no kept references
            STORE.clear()
        start = time.perf_counter()
        v = evaluate_candidate(problem, editable, seeds=1, device="cpu",
                               limits=SandboxLimits(warm=warm))
        wall = time.perf_counter() - start
        assert v.correct, v.message
        values.append(wall - _run_s(v.details))
    return statistics.median(values)


def measure(quick: bool = False) -> dict[str, Any]:
    """Every example (the first two with --quick); saves and returns the data."""
    start = time.perf_counter()
    run_sandboxed("kernelband.sandbox.probes:echo", {}, SandboxLimits(warm=True, interpret=True))
    zygote_start_s = time.perf_counter() - start
    rows = []
    for path in sorted((ROOT / "examples").glob("*.py"))[:2 if quick else None]:
        problem = load_problem_sandboxed(path.read_text(), "native", path.stem)
        rows.append({"problem": path.stem, "cold_overhead_s": _overhead(problem, warm=False),
                     "warm_overhead_s": _overhead(problem, warm=True),
                     "warm_candidate_overhead_s": _overhead(problem, True, problem.editable),
                     "warm_first_candidate_overhead_s": _overhead(problem, True, problem.editable,
                                                                  fresh_references=True)})
    shutdown_pool()
    data = {"label": "measured", "device": "cpu (Triton interpreter)", "repeats": REPEATS,
            "zygote_start_s": zygote_start_s, "machine": machine_line(), "rows": rows}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    JSON_PATH.write_text(json.dumps(data, indent=2))
    return data


def section(data: dict[str, Any]) -> str:
    """The `evaluator-overhead` section of bench/RESULTS.md."""
    rows = [(r["problem"], *(fmt(r[key], 3) for key, _ in COLUMNS),
             fmt(r["cold_overhead_s"] / r["warm_overhead_s"], 1)) for r in data["rows"]]
    return ("## Evaluator overhead\n\n"
            f"Command: `python -m bench.evaluator_overhead`; {data['label']} on {data['device']}, "
            f"median of {data['repeats']} runs. {data.get('machine', '')} Overhead = wall time of "
            "`evaluate_candidate` minus the time inside the reference and candidate calls (as the "
            "runners report it); cold = fresh interpreter per evaluation, warm = forked from the "
            "zygote; original = the problem's own kernel (one runner), candidate = its region "
            "passed as a candidate (its own runner, the original's references kept from the "
            "checks before), first candidate = the same with no references kept (a runner of the "
            f"original starts too). Zygote start (once per process): {data['zygote_start_s']:.2f} "
            "s.\n\n" + markdown_table(("problem", *(label for _, label in COLUMNS), "cold / warm"),
                                      rows))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first two examples only")
    data = measure(parser.parse_args(argv).quick)
    write_section("evaluator-overhead", section(data))
    print(section(data))


if __name__ == "__main__":
    main()
