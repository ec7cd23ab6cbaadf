"""The same suite run twice on a lent GPU: do the reported speedups repeat, and does each lie
inside its own 95% interval?

    python -m bench.gpu.suite_twice --target h200 --run A     # one suite run, < 10 minutes
    python -m bench.gpu.suite_twice --target h200 --run B     # the same suite again
    python -m bench.gpu.suite_twice --target h200 --compare   # the table (also after each run)

Each run is `kernelband suite` (rules generator, default policy, T = 4 by default) on 8 corpus
TritonBench-G problems with their perf harnesses (bench.gpu.fleet.DEFAULT_PICKS), in its own SQLite
database; the run's report is kept in suite-twice-<target>-<run>.json in the run folder (--out,
default bench/gpu/runs/suite-twice-<target>-<date>), every profile and verify step with its parts
in steps-<target>-<run>.md beside it. The comparison (suite-twice-<target>.md there) lists per
problem both runs' best speedups with their intervals, whether they agree (within 5%, or
overlapping intervals) and whether every reported point lies inside its own interval. Nothing here
is estimated: on a machine without a GPU the script refuses to run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.gpu.fleet import DEFAULT_PICKS
from bench.gpu.suite_steps import steps_markdown
from bench.scenarios import run_folder

AGREE_WITHIN = 0.05


def run_path(out: Path, target: str, run: str) -> Path:
    return out / f"suite-twice-{target}-{run}.json"


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["problem"], row["target"], row["policy"]


def inside(row: dict[str, Any]) -> bool | None:
    """Whether the reported point lies inside its own interval (None: no interval to check)."""
    low, high, point = row.get("speedup_low"), row.get("speedup_high"), row.get("speedup")
    if low is None or high is None or point is None:
        return None
    return bool(low <= point <= high)


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two runs' best speedups of one problem: within 5% of each other, intervals overlapping."""
    pa, pb = a.get("speedup"), b.get("speedup")
    if pa is None or pb is None:
        return {"within": None, "overlap": None, "agree": None if pa is None and pb is None else False}
    within = abs(pa / pb - 1.0) <= AGREE_WITHIN
    low_a, high_a = a.get("speedup_low"), a.get("speedup_high")
    low_b, high_b = b.get("speedup_low"), b.get("speedup_high")
    overlap = None
    if low_a is not None and high_a is not None and low_b is not None and high_b is not None:
        overlap = bool(low_a <= high_b and low_b <= high_a)
    return {"within": within, "overlap": overlap, "agree": within or bool(overlap)}


def compare(report_a: dict[str, Any], report_b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per problem in either run, with both texts, agreement and interval checks."""
    rows_a = {_key(r): r for r in report_a.get("problems", [])}
    rows_b = {_key(r): r for r in report_b.get("problems", [])}
    out = []
    for key in sorted(set(rows_a) | set(rows_b)):
        a, b = rows_a.get(key, {}), rows_b.get(key, {})
        out.append({"problem": key[0], "target": key[1], "policy": key[2],
                    "a": a.get("speedup_text", "not run"), "b": b.get("speedup_text", "not run"),
                    "a_correct": bool(a.get("correct")), "b_correct": bool(b.get("correct")),
                    **agreement(a, b), "inside_a": inside(a), "inside_b": inside(b)})
    return out


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "**no**")


def render(target: str, rows: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> str:
    """Markdown: the per-problem table, the summary and both runs' suite metrics."""
    lines = [f"# The same suite twice on {target}", "",
             "Command: `python -m bench.gpu.suite_twice --target " + target + " --run A`, then "
             "`--run B` (each one `kernelband suite`, rules generator, default policy).", "",
             "| problem | run A | run B | within 5% | intervals overlap | agree | A inside its "
             "interval | B inside its interval |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['problem']} | {r['a']} | {r['b']} | {_mark(r['within'])} | "
                     f"{_mark(r['overlap'])} | {_mark(r['agree'])} | {_mark(r['inside_a'])} | "
                     f"{_mark(r['inside_b'])} |")
    both = [r for r in rows if r["within"] is not None]
    outside = [r["problem"] for r in rows if False in (r["inside_a"], r["inside_b"])]
    lines += ["", f"{sum(r['agree'] for r in both)} of {len(both)} problems with a speedup in "
              "both runs agree (within 5% or overlapping intervals); reported speedups outside "
              f"their own interval: {len(outside)}" + (f" ({', '.join(outside)})" if outside else ""),
              "", "| run | target | policy | Correct % | Fast@1 % (95% low > 1) | Fast@1 % (point) "
              "| geomean (correct) | label | wall s |", "| --- | --- | --- | --- | --- | --- | --- "
              "| --- | --- |"]
    for name, run in runs.items():
        for m in (run.get("report") or {}).get("metrics", []):
            geo = m.get("geomean_speedup_correct")
            lines.append(f"| {name} | {m['target']} | {m['policy']} | {m['correct_pct']:.1f} | "
                         f"{m['fast1_pct']:.1f} | {m.get('fast1_point_pct', 0.0):.1f} | "
                         f"{'-' if geo is None else f'{geo:.3f}x'} | {m['label']} | "
                         f"{run.get('wall_s', 0):.0f} |")
    return "\n".join(lines) + "\n"


def run_once(out: Path, target: str, run: str, names: list[str], budget: int,
             timeout_s: float) -> int:
    import torch

    from bench.gpu.corpus_gpu import corpus_root, suite_phase

    if not torch.cuda.is_available():
        print("this needs a CUDA GPU; run it on a lent GPU node")
        return 2
    result = suite_phase(names, corpus_root(), target, budget, timeout_s)
    result["device"] = torch.cuda.get_device_name(0)
    out.mkdir(parents=True, exist_ok=True)
    run_path(out, target, run).write_text(json.dumps(result, indent=1, default=str))
    print(f"run {run}: {result['status']}, wall {result['wall_s']:.0f} s -> "
          f"{run_path(out, target, run)}")
    if Path(result["database"]).is_file():  # every step's parts, beside the report's medians
        (out / f"steps-{target}-{run}.md").write_text(steps_markdown(Path(result["database"])))
    return 0


def write_comparison(out: Path, target: str) -> int:
    runs = {name: json.loads(run_path(out, target, name).read_text())
            for name in ("A", "B") if run_path(out, target, name).exists()}
    if len(runs) < 2:
        print(f"only {sorted(runs) or 'no'} run(s) so far; run --run A and --run B")
        return 0
    rows = compare(runs["A"].get("report") or {}, runs["B"].get("report") or {})
    text = render(target, rows, runs)
    (out / f"suite-twice-{target}.md").write_text(text)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.suite_twice",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="h200")
    parser.add_argument("--run", choices=("A", "B"), help="run the suite once, as run A or B")
    parser.add_argument("--compare", action="store_true", help="only write the comparison")
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--names", nargs="*", default=None, help="corpus problem names")
    parser.add_argument("--budget", type=int, default=4, help="T: iterations per problem")
    parser.add_argument("--timeout", type=float, default=540.0, help="seconds for one run")
    parser.add_argument("--out", type=Path, default=None,
                        help="run folder of both runs (default bench/gpu/runs/suite-twice-"
                             "<target>-<date>)")
    args = parser.parse_args(argv)
    out = args.out or run_folder("suite-twice", args.target)
    if args.run:
        names = args.names or list(DEFAULT_PICKS)[:args.problems]
        code = run_once(out, args.target, args.run, names, args.budget, args.timeout)
        if code:
            return code
    return write_comparison(out, args.target)


if __name__ == "__main__":
    sys.exit(main())
