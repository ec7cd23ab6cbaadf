"""`python -m kernelband.demo`: evaluate every bundled example on the CPU interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def main() -> int:
    """Print a table (problem, cases, seeds, verdict, reason); 1 if any example fails."""
    from rich.console import Console
    from rich.table import Table

    from kernelband.evaluate import evaluate_candidate
    from kernelband.problem.model import ProblemLoadError
    from kernelband.sandbox import load_problem_sandboxed, shutdown_pool

    table = Table(title="KernelBand demo: original kernels checked on the CPU interpreter (simulated device, no GPU timing)")
    for column in ("problem", "cases (public + held-out)", "seeds", "verdict", "reason", "sandbox s"):
        table.add_column(column)
    failures = 0
    try:
        for path in sorted(EXAMPLES.glob("*.py")):
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
