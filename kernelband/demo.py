"""`python -m kernelband.demo`: check every bundled example on the CPU interpreter, then run one
embedded optimization job (rules generator, `cpu` target: times are labelled estimates)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelband.bundled import examples_dir
from kernelband.commands.optimize import outcome_table
from kernelband.config import Settings, get_settings
from kernelband.evaluate import evaluate_candidate
from kernelband.problem.model import ProblemLoadError
from kernelband.sandbox import load_problem_sandboxed, shutdown_pool
from kernelband.sandbox.jail import describe_isolation
from kernelband.scheduling.embedded import JobOptions, run_local_job, write_best

DEMO_EXAMPLE = "softmax"
DEMO_BUDGET = 6


def main() -> int:
    """The examples table, then one optimize job; 1 if any example or the job fails."""
    os.environ.setdefault("KERNELBAND_SANDBOX_ISOLATION", "weak")  # one user's own examples
    print(f"sandbox isolation: {describe_isolation()}")
    failures = check_examples()
    return optimize_example() or failures


def optimize_example() -> int:
    """`kernelband optimize examples/softmax.py --target cpu` in a fresh data directory."""
    console = Console()
    path = examples_dir() / f"{DEMO_EXAMPLE}.py"
    console.print(f"\n[bold]kernelband optimize {path.name} --target cpu --budget {DEMO_BUDGET}"
                  "[/] (offline rules generator; cpu times are cost-model estimates)")
    with tempfile.TemporaryDirectory(prefix="kernelband-demo-") as tmp:
        try:
            problem = load_problem_sandboxed(path.read_text(encoding="utf-8"), "native", path.stem)
            options = JobOptions(targets=("cpu",), budget=DEMO_BUDGET, parallel=2, seed=0)
            outcome = run_local_job(Settings(data_dir=Path(tmp), poll_interval_s=0.05), problem,
                                    options)
        finally:
            shutdown_pool()
        console.print(outcome_table(outcome))
        out = get_settings().data_dir / "demo" / f"best_{DEMO_EXAMPLE}.py"
        written = write_best(outcome, problem, out)
    for best in written:
        console.print(f"best kernel (with provenance header) written to {best}")
    return 0 if outcome.status == "completed" else 1


def check_examples() -> int:
    """Print a table (problem, cases, seeds, verdict, reason); 1 if any example fails."""
    table = Table(title="KernelBand demo: original kernels checked on the CPU interpreter (simulated device, no GPU timing)")
    for column in ("problem", "cases (public + held-out)", "seeds", "verdict", "reason", "sandbox s"):
        table.add_column(column)
    failures = 0
    try:
        for path in sorted(examples_dir().glob("*.py")):
            try:
                problem = load_problem_sandboxed(path.read_text(encoding="utf-8"), "native", path.stem)
            except ProblemLoadError as exc:
                table.add_row(path.stem, "-", "-", "[red]not loaded", str(exc), "-")
                failures += 1
                continue
            v = evaluate_candidate(problem, None, held_out=True, seeds=3, device="cpu")
            failures += not v.correct
            cases = f"{len(problem.cases)} + {len(problem.held_out_cases)}"
            verdict = "[green]correct" if v.correct else "[red]rejected"
            table.add_row(problem.name, cases, str(v.seeds), verdict, v.message if not v.correct else v.reason,
                          f"{v.details.get('sandbox_wall_s', 0.0):.2f}")
    finally:
        shutdown_pool()
    Console().print(table)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
