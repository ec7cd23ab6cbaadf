"""The corpus on a lent GPU: `python -m bench.corpus --target h100` (or h200), one command.

Two phases, each with its own time box so the whole run fits in about 7 minutes on one GPU:
1. every TritonBench-G original through `kernelband check --format tritonbench` on CUDA
   (bench/corpus_check.py's code path, several checks at once, the largest files first);
2. a short suite (rules generator, T >= 5) on accepted problems with a NAME_perf.py harness:
   Correct / Fast@1 / geomean.

The perf-harness timing against TritonBench's own `do_bench` (a third phase, last held by
commit 93e9630) answered its question: 12 of 14 problems within 5% on an H200, 20 of 22 on an
H100 (bench/gpu/RESULTS-corpus.md).

Writes corpus-<target>.json and .md into the run folder (bench/gpu/runs/corpus-<target>-<date>). A phase cut short by its time box says so;
problems it did not reach are listed as not run. Nothing is estimated here: every time is
measured on the GPU named in the output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.common import markdown_table
from bench.corpus_check import CORPUS, ROOT, acceptance_table, check_files
from bench.scenarios import run_folder
from kernelband.db.models import Suite
from kernelband.db.session import open_database, session_scope
from kernelband.suite.store import suite_report, suite_steps, suite_throughput

PHASE_S = {"check": 240.0, "suite": 120.0}
# sandbox budgets of the check phase: a GPU run is short, first compiles are not
CHECK_ENV = {"KERNELBAND_SANDBOX_TIMEOUT_S": "30", "KERNELBAND_SANDBOX_COMPILE_S": "90"}
SUITE_PROBLEMS = int(os.environ.get("KERNELBAND_CORPUS_SUITE_PROBLEMS", "8"))


def corpus_root() -> Path:
    """../shared/corpus, or ./shared/corpus where the checkout carries it."""
    for candidate in (CORPUS, ROOT / "shared" / "corpus"):
        if (candidate / "tritonbench-g" / "kernels").is_dir():
            return candidate
    raise SystemExit(f"corpus not found at {CORPUS} or {ROOT / 'shared' / 'corpus'}")


def suite_phase(names: list[str], root: Path, target: str, budget: int,
                timeout_s: float) -> dict[str, Any]:
    """`kernelband suite` (rules generator) on copies of `names` and their harnesses."""
    folder = Path(tempfile.mkdtemp(prefix="kb-corpus-suite-"))
    for name in names:
        shutil.copy(root / "tritonbench-g" / "kernels" / f"{name}.py", folder / f"{name}.py")
        shutil.copy(root / "tritonbench-g" / "perf" / f"{name}_perf.py", folder / f"{name}_perf.py")
    report = folder / "report.json"
    cmd = [sys.executable, "-m", "kernelband.cli", "suite", str(folder), "--format", "tritonbench",
           "--target", target, "--budget", str(budget), "--json", str(report)]
    start = time.monotonic()
    try:
        env = {**os.environ, "KERNELBAND_DATABASE_URL": f"sqlite:///{folder / 'suite.db'}"}
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                              env=env)
        status = f"exit {done.returncode}"
        tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        status, tail = f"timed out after {timeout_s:.0f} s", str(exc.stdout or "")[-3000:]
    data = json.loads(report.read_text()) if report.exists() else stored_report(folder / "suite.db")
    if data is not None and not report.exists():
        status += (f"; report as stored: {data['jobs_finished']} of {len(data['job_ids'])} jobs "
                   "finished (an unfinished job counts as not correct)")
    return {"problems": names, "budget": budget, "status": status,
            "wall_s": time.monotonic() - start, "report": data, "output_tail": tail,
            "database": str(folder / "suite.db")}


def stored_report(database: Path) -> dict[str, Any] | None:
    """The suite report as its database holds it (a suite cut short by its box keeps the jobs
    it finished), or None when no suite was stored."""
    if not database.exists():
        return None
    engine, factory = open_database(f"sqlite:///{database}", migrate=False)
    try:
        with session_scope(factory) as session:
            suite_id = session.scalar(select(Suite.id).order_by(Suite.created_at.desc()))
            return None if suite_id is None else replace(
                suite_report(session, suite_id), throughput=suite_throughput(session, suite_id),
                steps=suite_steps(session, suite_id)).to_dict()
    finally:
        engine.dispose()


def suite_section(suite: dict[str, Any]) -> str:
    """Markdown: the suite's metrics rows (or why there are none)."""
    report = suite.get("report")
    head = (f"Problems: {', '.join(suite['problems'])}; rules generator (offline), policy "
            f"kernelband, budget T = {suite['budget']}, timing: perf harness (call_op alone, "
            f"CUDA events, L2 flushed, median). Status: {suite['status']}, "
            f"wall {suite['wall_s']:.0f} s.\n\n")
    if not report:
        return head + "No report was written; output tail:\n\n```\n" + suite["output_tail"] + "\n```"
    return head + markdown_table(
        ("target", "policy", "problems", "Correct %", "Fast@1 %", "geomean (correct)",
         "geomean (all)", "label"),
        [(m["target"], m["policy"], m["problems"], f"{m['correct_pct']:.1f}",
          f"{m['fast1_pct']:.1f}", m["geomean_speedup_correct"], m["geomean_speedup_all"],
          m["label"]) for m in report.get("metrics", [])])


def render(data: dict[str, Any]) -> str:
    """The whole corpus-<target>.md."""
    check = {"rows": data["check"], "device": data["device"], "wall_s": data["check_wall_s"],
             "workers": data["workers"], "seeds": 1}
    return (f"# TritonBench-G corpus on {data['device']} (target {data['target']})\n\n"
            f"Command: `{data['command']}`; torch {data['torch']}, triton {data['triton']}; "
            f"total wall {data['wall_s']:.0f} s.\n\n## Acceptance of the originals (CUDA)\n\n"
            + acceptance_table(check) + "\n\n## Short suite\n\n" + suite_section(data["suite"]) + "\n")


def phase_boxes(overrides: str) -> dict[str, float]:
    """PHASE_S with overrides such as "check=450,suite=0" (KERNELBAND_CORPUS_PHASE_S)."""
    boxes = dict(PHASE_S)
    for item in filter(None, (part.strip() for part in overrides.split(","))):
        name, _, seconds = item.partition("=")
        if name not in boxes:
            raise SystemExit(f"KERNELBAND_CORPUS_PHASE_S: unknown phase {name!r}; use {sorted(boxes)}")
        boxes[name] = float(seconds)
    return boxes


def main(target: str, only: list[str] | None, workers: int | None = None,
         budget: int = 5, label: str = "", out: Path | None = None) -> int:
    """Run the two phases and write corpus-<target>[-<label>].{json,md} into `out`.

    The suite is skipped when its box is 0 (KERNELBAND_CORPUS_PHASE_S="suite=0")."""
    import torch
    import triton

    if not torch.cuda.is_available():
        print("--target needs a CUDA GPU; this machine has none (run it on a lent GPU)")
        return 2
    start = time.monotonic()
    root = corpus_root()
    files = sorted((root / "tritonbench-g" / "kernels").glob("*.py"))
    files = [f for f in files if not only or f.stem in only]
    workers = workers if workers and workers > 2 else 8
    for name, value in CHECK_ENV.items():  # the caller's environment may set other budgets
        os.environ.setdefault(name, value)
    boxes = phase_boxes(os.environ.get("KERNELBAND_CORPUS_PHASE_S", ""))
    check = check_files(files, workers, 1, deadline=time.monotonic() + boxes["check"])
    check_wall = time.monotonic() - start
    with_perf = [r["file"].removesuffix(".py") for r in check if r["accepted"]
                 and (root / "tritonbench-g" / "perf" / r["file"].replace(".py", "_perf.py")).is_file()]
    suite = (suite_phase(with_perf[:SUITE_PROBLEMS], root, target, max(5, budget), boxes["suite"])
             if boxes["suite"] > 0 else {"problems": [], "budget": budget,
                                         "status": "skipped (suite=0)", "wall_s": 0.0,
                                         "report": None, "output_tail": ""})
    data = {"target": target, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": triton.__version__, "workers": workers, "check": check,
            "check_wall_s": check_wall, "suite": suite,
            "command": f"python -m bench.corpus --target {target}",
            "phase_boxes_s": boxes, "wall_s": time.monotonic() - start}
    out = out or run_folder("corpus", target)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"corpus-{target}" + (f"-{label}" if label else "")
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1, default=str))
    (out / f"{stem}.md").write_text(render(data))
    print(render(data))
    return 0
