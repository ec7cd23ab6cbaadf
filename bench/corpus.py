"""Corpus benchmark: every TritonBench-G original through `kernelband check --format tritonbench`.

Writes the acceptance table (accepted; each refusal reason with its count and files) to
bench/results/corpus-<device>.json and the `corpus` section of bench/RESULTS.md. With
`--target h100|h200` (on a GPU machine) it runs bench/gpu/corpus_gpu.py instead: the same check on
CUDA, the perf-harness timing comparison and a short suite, written into a run folder under
bench/gpu/runs/.

The corpus lives outside the repository (../shared/corpus from the repo root); without it the
benchmark says so and does nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from bench.common import machine_line, write_section
from bench.corpus_check import (
    ROOT,
    TRITONBENCH,
    acceptance_table,
    check_one,
    corpus_files,
    short_line,
)
from bench.corpus_check import refusal_key as refusal_key
from bench.gpu import corpus_gpu
from kernelband.sandbox.device import detect_device

RESULTS_JSON_DIR = ROOT / "bench" / "results"


def _resumed(journal: Path | None) -> list[dict[str, Any]]:
    if journal is None or not journal.exists():
        return []
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def run_corpus(files: list[Path], workers: int = 2, fmt: str = "tritonbench",
               seeds: int = 3, journal: Path | None = None) -> list[dict[str, Any]]:
    """Check `files` with at most `workers` processes; rows sorted by file name. Rows are
    appended to `journal` as they finish, and files already in it are not checked again."""
    rows = _resumed(journal)
    done_names = {r["file"] for r in rows}
    files = [f for f in files if f.name not in done_names]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(check_one, str(f), fmt, seeds): f for f in files}
        for done, future in enumerate(as_completed(futures), 1):
            try:
                row = future.result()
            except Exception as exc:  # the bench must finish: a crash is a row, not an abort
                row = {"file": futures[future].name, "accepted": False, "reason": "bench_error",
                       "message": short_line(f"{type(exc).__name__}: {exc}")}
            rows.append(row)
            if journal is not None:
                with journal.open("a") as out:
                    out.write(json.dumps(row) + "\n")
            mark = "ok " if row["accepted"] else "REF"
            print(f"[{done}/{len(files)}] {mark} {row['file']}: {row['reason']} "
                  f"({row.get('wall_s', 0)} s) {'' if row['accepted'] else row['message'][:110]}",
                  flush=True)
    return sorted(rows, key=lambda r: r["file"])


def _accepted(data: dict[str, Any]) -> int:
    return sum(1 for r in data["rows"] if r["accepted"])


def _summary(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """One line comparing the runs, and how many refusals name the interpreter."""
    total = len(after["rows"])
    interpreter = sum(1 for r in after["rows"]
                      if not r["accepted"] and r["reason"].startswith("interpreter_"))
    line = f"Accepted: **{_accepted(after)}/{total}** ({after['label']})"
    if before is not None:
        line += f", against {_accepted(before)}/{len(before['rows'])} ({before['label']})"
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


def _machine() -> str:
    return machine_line().removeprefix("Machine: ")


def device_label() -> str:
    """Which device the checks ran on, in words."""
    device = detect_device()
    return "CPU (Triton interpreter, TRITON_INTERPRET=1)" if device == "cpu" else device


def main(argv: list[str] | None = None) -> int:
    """Run the corpus benchmark; returns a process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
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
    parser.add_argument("--report-only", action="store_true",
                        help="write the table from --journal; files not in it are 'not run'")
    parser.add_argument("--wall-s", type=float, help="with --report-only: the measured wall time")
    parser.add_argument("--wall-note", default="", help="with --report-only: how it was measured")
    args = parser.parse_args(argv)
    if args.target:
        return corpus_gpu.main(args.target, args.only, args.workers, label=args.label,
                               out=args.out)
    if not TRITONBENCH.is_dir():
        print(f"corpus benchmark skipped: {TRITONBENCH} not found (the corpus lives in "
              "../shared/corpus next to the repository)")
        return 0
    if args.report_only:
        return report_journal(corpus_files(only=args.only), args.journal, args.seeds, args.label,
                              args.wall_s, args.wall_note)
    return run_and_write(corpus_files(only=args.only), args.workers, args.seeds, args.label,
                         write=not args.no_write, journal=args.journal)


def report_journal(files: list[Path], journal: Path | None, seeds: int, label: str,
                   wall_s: float | None = None, wall_note: str = "") -> int:
    """The acceptance table of a journal (a run stopped early): unreached files are listed."""
    rows = _resumed(journal)
    seen = {r["file"] for r in rows}
    rows += [{"file": f.name, "accepted": False, "reason": "not run (the run was stopped)",
              "message": ""} for f in files if f.name not in seen]
    if wall_s is None:
        wall_s, wall_note = (sum(float(r.get("wall_s", 0)) for r in rows) / 2,
                             "estimated: sum of per-file wall times / 2 workers")
    data = {"label": label, "device": device_label(), "machine": _machine(), "workers": 2,
            "seeds": seeds, "wall_s": wall_s, "rows": sorted(rows, key=lambda r: r["file"]),
            "wall_note": wall_note}
    return _write(data)


def run_and_write(files: list[Path], workers: int, seeds: int, label: str, write: bool,
                  journal: Path | None = None) -> int:
    """Run the checks, save the JSON and the RESULTS.md section (keeping the earlier run)."""
    start = time.perf_counter()
    rows = run_corpus(files, workers, seeds=seeds, journal=journal)
    data = {"label": label or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "device": device_label(), "machine": _machine(), "workers": workers, "seeds": seeds,
            "wall_s": time.perf_counter() - start, "rows": rows}
    print(acceptance_table(data))
    return _write(data) if write else 0


def _write(data: dict[str, Any]) -> int:
    """bench/results/corpus_tritonbench.json (the earlier run kept as _before) and RESULTS.md."""
    RESULTS_JSON_DIR.mkdir(parents=True, exist_ok=True)
    latest = RESULTS_JSON_DIR / "corpus_tritonbench.json"
    before_path = RESULTS_JSON_DIR / "corpus_tritonbench_before.json"
    if latest.exists() and not before_path.exists():
        before_path.write_text(latest.read_text())
    latest.write_text(json.dumps(data, indent=1))
    before = json.loads(before_path.read_text()) if before_path.exists() else None
    write_section("corpus", section(before, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
