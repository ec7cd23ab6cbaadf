"""The same fleet suite at several GPU counts, each on fresh servers and databases.

Real workers on real GPUs (bench/fleet_scaling.py is the simulated-GPU counterpart).

    python -m bench.gpu.fleet_scaling --target h200 --gpus-list 4,2,1 --out OUT

Each N is one run of bench.gpu.fleet with its own time limit, written into OUT/nN/ (with --pack: OUT/nN.tar.gz, so that few files come back from a lent machine).
After every run, OUT/scaling.json and OUT/scaling.md hold the table of what ran so far: wall,
pulls, pulls/s, efficiency T1 / (N x TN), busy share overall and per worker, integrity. A run
that fails or hits its limit is a row that says so; the sweep goes on.

Runs of one suite made in separate commands become one table with

    python -m bench.gpu.fleet_scaling --merge OUT_A OUT_B --out OUT

(each source: an earlier sweep's output folder, or its scaling.json).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from bench.gpu.fleet import add_run_options, run_one
from bench.gpu.fleet_tables import run_row, scaling_markdown, scaling_table, skipped_row

STOP_MARGIN_S = 75.0  # after a run's limit: its own stopping (~40 s), packing, the next start
MIN_RUN_S = 120.0  # the shortest time limit worth starting a run with


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.fleet_scaling",
                                     description=__doc__.split("\n\n")[0])
    add_run_options(parser)
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="build the table from these earlier outputs instead of running")
    parser.add_argument("--gpus-list", default="4,2,1", help="GPU counts, in run order")
    parser.add_argument("--run-limit-s", type=float, default=420.0,
                        help="time limit of one run, servers to report (default 420)")
    parser.add_argument("--total-limit-s", type=float, default=None,
                        help=f"the whole sweep; a run gets what is left less {STOP_MARGIN_S:.0f} "
                             f"s, and is skipped when that is under {MIN_RUN_S:.0f} s")
    parser.add_argument("--since", type=float, default=None,
                        help="epoch second the total limit counts from (default: now)")
    parser.add_argument("--pack", action="store_true", help="keep each run as OUT/nN.tar.gz")
    parser.add_argument("--label", default=None, help="a line at the top of scaling.md")
    return parser.parse_args(argv)


def gpu_counts(text: str) -> list[int]:
    """`4,2,1` -> [4, 2, 1]."""
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise SystemExit(f"--gpus-list {text!r}: give positive GPU counts, e.g. 4,2,1")
    return counts


def _free_name(out: Path, base: str) -> str:
    """`n4`, or `n4-2`, ... when an earlier run of this output folder holds that name."""
    name, k = base, 1
    while (out / name).exists() or (out / f"{name}.tar.gz").exists():
        k += 1
        name = f"{base}-{k}"
    return name


def sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each GPU count in turn, the table rewritten after each; the rows."""
    since, rows = args.since or time.time(), []
    for gpus in gpu_counts(args.gpus_list):
        limit = float(args.run_limit_s)
        if args.total_limit_s is not None:
            limit = min(limit, args.total_limit_s - (time.time() - since) - STOP_MARGIN_S)
        if limit < MIN_RUN_S:
            rows.append(skipped_row(gpus, f"{max(limit, 0):.0f} s left for it, under "
                                          f"{MIN_RUN_S:.0f} s"))
            print(f"N={gpus}: skipped, not enough time left", flush=True)
        else:
            name = _free_name(args.out, f"n{gpus}")
            print(f"N={gpus}: fleet run into {args.out / name} (time limit {limit:.0f} s)",
                  flush=True)
            rows.append(run_row(run_one(args, gpus, args.out / name, limit), name))
            if args.pack:
                pack(args.out / name, args.out / f"{name}.tar.gz")
                shutil.rmtree(args.out / name, ignore_errors=True)
        write_table(args.out, rows, args.label)
    return rows


def pack(run_dir: Path, archive: Path) -> None:
    """run_dir as a .tar.gz whose members sit under the run's name."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run_dir, arcname=archive.name.removesuffix(".tar.gz"))


def load_rows(source: Path) -> list[dict[str, Any]]:
    """The runs of an earlier sweep: its scaling.json, or the folder holding it (a sweep rewrites
    it after every run, so it lists each run that finished)."""
    path = source / "scaling.json" if source.is_dir() else source
    if not path.is_file():
        raise SystemExit(f"{source}: no scaling.json there")
    rows = list(json.loads(path.read_text()).get("runs", []))
    return [{**r, "source": f"{path.parent.name}/{r.get('source')}"} for r in rows]


def write_table(out: Path, rows: list[dict[str, Any]], label: str | None) -> str:
    """scaling.json and scaling.md from `rows`; returns the markdown."""
    table, notes = scaling_table(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(
        {"generated_at": time.time(), "label": label, "table": table, "notes": notes,
         "runs": rows}, indent=2, default=str))
    text = scaling_markdown(table, notes, label)
    (out / "scaling.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        print(write_table(args.out, [r for s in args.merge for r in load_rows(s)], args.label))
        return 0
    rows = sweep(args)
    print(f"scaling table in {args.out}/scaling.md and scaling.json", flush=True)
    print((args.out / "scaling.md").read_text(), flush=True)
    return 0 if all(r.get("complete") and r.get("integrity_ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
