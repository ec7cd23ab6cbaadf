"""Record measured replay tables over a TritonBench-G corpus: `python -m bench.gpu.record_replay
--corpus DIR --out DIR [--workers N] [--time-box-s S]`.

Every problem the service accepts is recorded breadth-first to `--depth`, exhaustively per
expanded parent (bench/gpu/recording.py): every rewrite the rules generator can apply, with the
child's correctness, time, phi and h (h: the service's cost-model / static-profile estimate,
not Nsight Compute) and failure reason. The rewrites come from the rules generator, not an LLM.
Problems run in parallel child processes (compile and check in parallel, CUDA timing one
process at a time); each has a time budget and a hard limit, and the run has a time box. On a
machine without CUDA (or with --device cpu) kernels run in the Triton interpreter and times are
the cost-model estimates, labelled estimated.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import platform
import time
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, required=True, help="folder of TritonBench-G *.py files")
    p.add_argument("--out", type=Path, required=True, help="folder for <problem>.json + provenance.json")
    p.add_argument("--device", default="", help="cuda or cpu (default: cuda when available)")
    p.add_argument("--depth", type=int, default=2, help="breadth-first depth (default 2)")
    p.add_argument("--workers", type=int, default=0, help="parallel problems (default: cores - 2)")
    p.add_argument("--problem-budget-s", type=float, default=150.0,
                   help="no new parent is expanded after this long on one problem")
    p.add_argument("--hard-limit-s", type=float, default=240.0,
                   help="a problem's process is killed after this (a hung kernel)")
    p.add_argument("--time-box-s", type=float, default=480.0, help="the whole run's wall limit")
    p.add_argument("--seeds", type=int, default=0, help="correctness seeds (default: 2 on cuda, 1 on cpu)")
    p.add_argument("--only", default="", help="comma-separated problem names")
    p.add_argument("--limit", type=int, default=0, help="at most this many problems (0: all)")
    return p.parse_args(argv)


def corpus_files(folder: Path, only: str, limit: int) -> list[Path]:
    """The corpus' problem files, smallest first (more problems finish inside the time box)."""
    if not folder.is_dir():
        raise SystemExit(f"--corpus {folder} is not a folder; pass the TritonBench-G kernels folder")
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", ".")))
    if only:
        wanted = {n.strip() for n in only.split(",") if n.strip()}
        missing = wanted - {p.stem for p in files}
        if missing:
            raise SystemExit(f"--only names not in {folder}: {sorted(missing)}")
        files = [p for p in files if p.stem in wanted]
    files.sort(key=lambda p: (p.stat().st_size, p.name))
    return files[:limit] if limit else files


class FileLock:
    """An exclusive flock on a file: released by the kernel when its holder dies."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> FileLock:
        import fcntl
        import os

        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        import os

        os.close(self.fd)  # closing drops the lock


def _child(path: Path, out: Path, device: str, depth: int, budget: float, seeds: int, lock: str) -> None:
    from kernelband.problem.devices import use_interpreter_for

    use_interpreter_for(device)
    from bench.gpu.recording import record_problem

    summary = record_problem(path, out, device, depth, budget, seeds, FileLock(lock))
    (out / f"{path.stem}.summary.json").write_text(json.dumps(summary) + "\n")


def run_pool(args: argparse.Namespace, files: list[Path], device: str) -> list[dict[str, Any]]:
    """Run problems in child processes; stop starting new ones when the time box nears."""
    ctx = mp.get_context("spawn")
    lock = str(args.out / ".gpu.lock")  # a file lock: a killed holder releases it
    seeds = args.seeds or (2 if device.startswith("cuda") else 1)
    workers = args.workers or max(1, (mp.cpu_count() or 2) - 2)
    started, queue = time.monotonic(), list(files)
    running: dict[str, tuple[Any, float]] = {}
    stopped: list[dict[str, Any]] = []
    while queue or running:
        now = time.monotonic() - started
        for name, (proc, since) in list(running.items()):
            late = now - since > args.hard_limit_s or now > args.time_box_s
            if late and proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
                stopped.append({"name": name, "status": "stopped",
                                "note": f"stopped after {now - since:.0f} s (hard limit / time box)"})
            if not proc.is_alive():
                proc.join()
                del running[name]
                if proc.exitcode and not late and not (args.out / f"{name}.summary.json").exists():
                    stopped.append({"name": name, "status": "crashed",
                                    "note": f"the recorder process exited with code {proc.exitcode}"})
        room = args.time_box_s - now > min(args.problem_budget_s, 60.0)
        while queue and len(running) < workers and room:
            path = queue.pop(0)
            proc = ctx.Process(target=_child, args=(path, args.out, device, args.depth,
                                                    args.problem_budget_s, seeds, lock))
            proc.start()
            running[path.stem] = (proc, now)
        if not room:
            stopped += [{"name": p.stem, "status": "not_started", "note": "time box"} for p in queue]
            queue = []
        time.sleep(0.5)
    return stopped


def provenance(args: argparse.Namespace, device: str, wall_s: float, problems: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the numbers come from: device, versions, date, methods."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "none (Triton interpreter)"
    measured = device.startswith("cuda")
    return {
        "label": "measured" if measured else "estimated",
        "rewrites": "the rules generator (kernelband/generate/rules), every distinct rewrite per "
                    "(parent, strategy); no LLM",
        "device": gpu, "host": platform.node(), "python": platform.python_version(),
        "torch": torch.__version__, "triton": triton.__version__,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "timing": ("CUDA events (kernelband.profile.timing, L2 flushed per run, 10-40 runs; "
                   "time_ms = lower quartile, median_ms = median) of each entry-function call "
                   "the test makes (first 4), summed; one process times at a time while others "
                   "compile and check; the perf-harness inputs were not used" if measured else
                   "estimated: the service's cost model for the reference GPU (no kernel timed)"),
        "h": "estimate from the service's cost model and static profile (not Nsight Compute)",
        "phi": "driver registers + static profile" if measured else "static profile + estimate",
        "correctness": "test function results (public and held-out keys) vs the original's, "
                       f"{args.seeds or (2 if measured else 1)} seed(s)",
        "depth": args.depth, "problem_budget_s": args.problem_budget_s,
        "time_box_s": args.time_box_s, "wall_s": round(wall_s, 1),
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    files = corpus_files(args.corpus, args.only, args.limit)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    stopped = run_pool(args, files, device)
    problems = []
    for path in files:
        summary = args.out / f"{path.stem}.summary.json"
        if summary.exists():
            problems.append(json.loads(summary.read_text()))
            summary.unlink()
    for entry in stopped:  # a stopped problem keeps the parents it finished
        table = args.out / f"{entry['name']}.json"
        if table.exists():
            doc = json.loads(table.read_text())["problems"][0]
            entry.update(kernels=len(doc["kernels"]), transitions=len(doc["transitions"]))
    problems += stopped
    (args.out / ".gpu.lock").unlink(missing_ok=True)
    (args.out / "provenance.json").write_text(
        json.dumps(provenance(args, device, time.monotonic() - started, problems), indent=1) + "\n")
    usable = [p for p in problems if p.get("transitions")]
    print(f"{len(usable)} problems with transitions, "
          f"{sum(p['transitions'] for p in usable)} transitions, "
          f"{time.monotonic() - started:.0f} s; provenance in {args.out / 'provenance.json'}")


if __name__ == "__main__":
    main()
