"""Corpus benchmark: every TritonBench-G original through `kernelband check --format tritonbench`.

Writes the acceptance table (accepted; each refusal reason with its count and files) to
bench/results/corpus_tritonbench.json (the run before kept as corpus_tritonbench_before.json) and
the `corpus` section of bench/RESULTS.md. With `--target h100|h200` (on a GPU machine) it runs
bench/gpu/corpus_gpu.py instead: the same check on CUDA and a short suite, written into a run
folder under bench/gpu/runs/.

The corpus lives outside the repository (../shared/corpus from the repo root); without it the
benchmark says so and does nothing. An hour-long CPU run can be stopped and resumed with
`--journal FILE`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, machine_line, write_section
from bench.corpus_check import (
    TRITONBENCH,
    acceptance_table,
    check_files,
    corpus_files,
)
from bench.gpu import corpus_gpu
from kernelband.sandbox.device import detect_device

LATEST, BEFORE = RESULTS_DIR / "corpus_tritonbench.json", RESULTS_DIR / "corpus_tritonbench_before.json"


def _summary(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """One line comparing the runs, and how many refusals name the interpreter."""
    def accepted(data: dict[str, Any]) -> str:
        return f"{sum(1 for r in data['rows'] if r['accepted'])}/{len(data['rows'])}"

    interpreter = sum(1 for r in after["rows"]
                      if not r["accepted"] and r["reason"].startswith("interpreter_"))
    line = f"Accepted: **{accepted(after)}** ({after['label']})"
    if before is not None:
        line += f", against {accepted(before)} ({before['label']})"
    return (line + f". Refusals that name the CPU interpreter as the cause (and a GPU target to "
            f"check on): {interpreter}.\n\n")


def section(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """The RESULTS.md section: the latest run, and the earlier run it is compared with."""
    head = ("## Corpus acceptance (TritonBench-G originals)\n\n"
            "Command: `python -m bench.corpus` (every file of ../shared/corpus/tritonbench-g/kernels "
            "through the code path of `kernelband check FILE --format tritonbench`). "
            f"Machine: {after['machine']}\n\n"
            "`interpreter_timeout`, `interpreter_crash` and `interpreter_unsupported` are originals "
            "the CPU Triton interpreter cannot run (too slow for the interpreter budget, a crash "
            "inside it, or a feature it lacks); their message names a GPU target to check them "
            "on. The GPU run of the same corpus is `python -m bench.corpus --target h100` "
            "(bench/gpu/RESULTS-corpus.md).\n\n")
    body = _summary(before, after) + "### Latest run\n\n" + acceptance_table(after)
    if before is not None:
        body += (f"\n\n### Before ({before.get('label', 'earlier run')})\n\n"
                 + acceptance_table(before))
    return head + body


def main(argv: list[str] | None = None) -> int:
    """Run the corpus benchmark; returns a process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("h100", "h200"), help="run the GPU variant (CUDA)")
    parser.add_argument("--out", type=Path, help="with --target: the run folder "
                        "(default bench/gpu/runs/corpus-<target>-<date>)")
    parser.add_argument("--workers", type=int, default=2,
                        help="parallel checks (default 2; with --target: 8)")
    parser.add_argument("--only", nargs="*", help="file stems to check (default: all)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--label", default="", help="a label for this run (e.g. before)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--journal", type=Path, help="append rows here; resume from it")
    args = parser.parse_args(argv)
    if args.target:
        return corpus_gpu.main(args.target, args.only, args.workers, label=args.label,
                               out=args.out)
    if not TRITONBENCH.is_dir():
        print(f"corpus benchmark skipped: {TRITONBENCH} not found (the corpus lives in "
              "../shared/corpus next to the repository)")
        return 0
    start = time.perf_counter()
    rows = check_files(corpus_files(only=args.only), args.workers, args.seeds,
                       journal=args.journal)
    device = detect_device()
    data = {"label": args.label or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": "CPU (Triton interpreter, TRITON_INTERPRET=1)" if device == "cpu" else device,
            "machine": machine_line().removeprefix("Machine: "), "workers": args.workers,
            "seeds": args.seeds, "wall_s": time.perf_counter() - start, "rows": rows}
    print(acceptance_table(data))
    if not args.no_write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        if LATEST.exists() and not BEFORE.exists():
            BEFORE.write_text(LATEST.read_text())
        LATEST.write_text(json.dumps(data, indent=1))
        before = json.loads(BEFORE.read_text()) if BEFORE.exists() else None
        write_section("corpus", section(before, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
