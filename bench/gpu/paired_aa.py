"""A/A on a lent GPU: each corpus original measured against itself through the real measure path.

    python -m bench.gpu.paired_aa --corpus ../shared/corpus/tritonbench-g --problems 8 [--graphs]

For each TritonBench-G problem (with a performance harness) the script loads the problem in the
sandbox, checks the original as a candidate (the evaluator), then measures it as its own
candidate with `measure_candidate` (two live runners, ABBA rounds, the judge's clock). Every
interval should contain 1.00 and every point should be within 3% of 1.00. `--graphs` measures
each problem twice, with many launches per batch and with CUDA-graph replays, for comparison.
The profile step's parts (load, correctness, the original's runner = reference, candidate's
runner, calibration, timed rounds, output checks, features) are printed per problem.

Writes paired-aa-<target>.json and .md to --out (default bench/gpu/runs/paired-aa-<target>-<date>). `--cpu` rehearses the same
flow on the CPU interpreter (runner CPU time as the clock; not kernel timings).

`--beside N` runs the A/A under load: an N-problem corpus suite (bench.gpu.suite_twice, T = 4)
starts on the same GPU `--beside-lead-s` seconds before the A/A and is stopped when it ends, so
shared GPU work (checks, runner starts, compiles) is running or waiting whenever the A/A times:
the test of how exclusive turns keep other work out of the timed rounds (docs/measurement.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.scenarios import ROOT, RUNS, run_folder

WITHIN = 0.03
PARTS = ("load", "correctness", "spare_start", "load_original", "wait_shared", "load_candidate", "calibrate", "prepare", "inputs", "timed_rounds", "verify",
         "after", "tune", "held_alone", "measure")


def _problems(corpus: Path, count: int, only: list[str]) -> list[str]:
    """Problems with a harness: `only`, else the fastest on the last H200 perf run, else sorted."""
    harnessed = {p.name.removesuffix("_perf.py") for p in (corpus / "perf").glob("*_perf.py")}
    names = [n for n in only if n in harnessed] if only else []
    if not names:
        recorded = RUNS / "corpus-h200-2026-11-26" / "corpus-h200-perf.json"
        if recorded.exists():
            rows = json.loads(recorded.read_text()).get("perf", [])
            timed = sorted((r["ours_ms"], r["problem"]) for r in rows if r.get("problem") in harnessed)
            names = [name for ms, name in timed if ms < 2.0]
        names = names or sorted(harnessed)
    return names[:count]


def _target() -> str:
    from kernelband.profile.paired_gpu import gpu_name

    name = gpu_name("h200").upper()
    return next((t for t in ("h200", "h100", "a100", "rtx4090") if t.upper().replace("RTX", "") in name), "h200")


def measure_one(name: str, corpus: Path, target: str, graphs: bool, cpu: bool, spare: bool = False,
                check_in_runner: bool = False) -> dict[str, Any]:
    from kernelband.evaluate import evaluate_candidate
    from kernelband.profile.paired_gpu import config_from_settings
    from kernelband.profile.paired_runners import SPARES, runner_limits
    from kernelband.profile.perf_harness import with_perf_harness
    from kernelband.profile.runner_check import RunnerCheck
    from kernelband.sandbox import load_problem_sandboxed

    parts: dict[str, float] = {}
    start = time.perf_counter()
    source = (corpus / "kernels" / f"{name}.py").read_text()
    problem = load_problem_sandboxed(source, "tritonbench", name)
    problem = with_perf_harness(problem, (corpus / "perf" / f"{name}_perf.py").read_text())
    parts["load"] = time.perf_counter() - start
    # with `check_in_runner` (a GPU only) the check runs in the candidate's runner before its first
    # prepare, as a GPU node's profile step makes it: whatever that leaves in the runner is in the A/A
    gate = RunnerCheck(lambda in_runner: evaluate_candidate(problem, problem.editable, device=None,
                                                            in_runner=in_runner)) if check_in_runner and not cpu else None
    start = time.perf_counter()
    verdict = evaluate_candidate(problem, problem.editable, device="cpu" if cpu else None) if gate is None else None
    parts["correctness"] = time.perf_counter() - start
    row: dict[str, Any] = {"problem": name, "graphs": graphs, "correct": verdict.correct if verdict else None}
    config = replace(config_from_settings(), graphs=graphs)
    if spare and not cpu:  # the candidate's runner started ahead, as a problem's later candidates get it
        start = time.perf_counter()
        SPARES.start_soon(problem, "cuda", config, runner_limits(None, "cuda", config))
        while SPARES.starting and time.perf_counter() - start < 600:
            time.sleep(0.05)
        parts["spare_start"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        measurement = _measure(problem, target, config, cpu, gate)
    except Exception as exc:  # a row says why; the table goes on
        return row | {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "parts_s": parts}
    finally:
        if gate is not None:
            row["correct"] = gate.verdict.correct if gate.verdict else None
            row["checked_in_runner"] = gate.in_runner
            parts["correctness"] = gate.check_s
    parts["measure"] = time.perf_counter() - start
    parts |= {k: float(v) for k, v in (measurement.checks.get("parts_s") or {}).items()}
    speedup = measurement.speedup
    assert speedup is not None
    return row | {"point": speedup.point, "low": speedup.low, "high": speedup.high, "rounds": speedup.rounds,
                  "contains_one": speedup.contains_one, "within_3pct": abs(speedup.point - 1.0) <= WITHIN,
                  "time_ms": measurement.time_ms, "batch": measurement.checks.get("batch"),
                  "device": measurement.device, "method": measurement.method, "parts_s": parts,
                  "round_ms": measurement.checks.get("round_ms"),
                  "runner_gpu_round_ms": measurement.checks.get("runner_gpu_round_ms"),
                  "notes": measurement.checks.get("notes"), "spare_runner": measurement.checks.get("spare_runner"),
                  "inputs_drawn": measurement.checks.get("inputs_drawn", ""),
                  "runner_gpu_ratio": _claimed_ratio(measurement.checks.get("runner_gpu_round_ms") or {})}


def _claimed_ratio(rounds: dict[str, list[float]]) -> float | None:
    """Geometric mean of original/candidate by the runners' own CUDA events: diagnostics only
    (what the GPU saw, beside the judge's clock, which also holds launch overhead)."""
    pairs = [(o, c) for o, c in zip(rounds.get("original", []), rounds.get("candidate", []), strict=False)
             if o > 0 and c > 0]
    if not pairs:
        return None
    return math.exp(statistics.fmean(math.log(o / c) for o, c in pairs))


def _measure(problem: Any, target: str, config: Any, cpu: bool, until_checked: Any = None) -> Any:
    if cpu:
        from kernelband.profile.paired_result import measure_speedup

        return measure_speedup(problem, problem.editable, "cpu", target="cpu", device_name="host",
                               config=replace(config, clock="cpu", batch_ms=50.0, rounds=8))
    from kernelband.profile import measure_candidate

    return measure_candidate(problem, problem.editable, target, hardware_signature=False, paired_config=config,
                             features=False, until_checked=until_checked)[0]


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| problem | mode | point | [low, high] | contains 1.0 | within 3% | k per case | runners' CUDA events |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        mode = "graphs" if r["graphs"] else "launches"
        if "error" in r:
            lines.append(f"| {r['problem']} | {mode} | error | {r['error'][:80]} | - | - | - | - |")
            continue
        batch = "/".join(str(k) for k in (r.get("batch") or {}).values())
        gpu = f"{r['runner_gpu_ratio']:.3f}" if r.get("runner_gpu_ratio") else "-"
        lines.append(f"| {r['problem']} | {mode} | {r['point']:.3f} | [{r['low']:.3f}, {r['high']:.3f}] | "
                     f"{'yes' if r['contains_one'] else 'NO'} | {'yes' if r['within_3pct'] else 'NO'} | {batch} | {gpu} |")
    return "\n".join(lines)


def parts_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| problem | mode | " + " | ".join(PARTS) + " |", "| --- | --- |" + " --- |" * len(PARTS)]
    for r in rows:
        parts = r.get("parts_s", {})
        cells = " | ".join(f"{parts[p]:.2f}" if p in parts else "-" for p in PARTS)
        lines.append(f"| {r['problem']} | {'graphs' if r['graphs'] else 'launches'} | {cells} |")
    medians = {p: statistics.median(v) for p in PARTS if (v := [r["parts_s"][p] for r in rows if p in r.get("parts_s", {})])}
    lines.append("| median | | " + " | ".join(f"{medians[p]:.2f}" if p in medians else "-" for p in PARTS) + " |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    out = []
    for graphs in sorted({r["graphs"] for r in rows}):
        ok = [r for r in rows if r["graphs"] == graphs and "error" not in r]
        mode = "graphs" if graphs else "launches"
        width = [r["high"] / r["low"] for r in ok]
        out.append(f"{mode}: {sum(r['contains_one'] for r in ok)}/{len(ok)} intervals contain 1.00, "
                   f"{sum(r['within_3pct'] for r in ok)}/{len(ok)} points within 3%"
                   + (f", median interval width (high/low) {statistics.median(width):.3f}" if width else "")
                   + f"; {sum(bool(r.get('spare_runner')) for r in ok)}/{len(ok)} in a spare runner"
                   + f"; harness inputs drawn on the device in {sum(r.get('inputs_drawn') == 'device' for r in ok)}"
                   + f"/{len(ok)}")
    return "\n".join(out)


def corpus_parser(description: str) -> argparse.ArgumentParser:
    """The options of a benchmark over corpus problems: which, where, CPU rehearsal, run folder."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus" / "tritonbench-g")
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--only", default="", help="comma-separated problem names")
    parser.add_argument("--cpu", action="store_true", help="rehearse on the CPU interpreter")
    parser.add_argument("--out", type=Path, default=os.environ.get("OUT"), help="run folder")
    return parser


def corpus_missing(corpus: Path) -> bool:
    """True (and says so) when there is no corpus to read: the benchmark cannot run."""
    if (corpus / "kernels").is_dir():
        return False
    print(f"no corpus at {corpus}: pass --corpus ../shared/corpus/tritonbench-g", file=sys.stderr)
    return True


@contextmanager
def suite_beside(problems: int, target: str, out: Path, lead_s: float) -> Iterator[str]:
    """An N-problem suite on this GPU while the block runs; yields how the A/A ran ("" for alone)."""
    if problems <= 0:
        yield ""
        return
    out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "bench.gpu.suite_twice", "--target", target, "--out", str(out / "beside-suite"),
            "--run", "A", "--problems", str(problems), "--timeout", "3600"]
    with (out / "beside-suite.log").open("w") as log:
        suite = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        try:
            time.sleep(lead_s)  # its first problems are loading when the A/A starts
            yield f"beside a {problems}-problem suite on the same GPU (started {lead_s:g} s before)"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(suite.pid, signal.SIGTERM)
            try:
                suite.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(suite.pid, signal.SIGKILL)
                suite.wait()


def main(argv: list[str] | None = None) -> int:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--graphs", action="store_true", help="also measure with CUDA-graph replays")
    parser.add_argument("--spares", action="store_true",
                        help="measure each original in a runner started ahead (a spare), as later candidates are")
    parser.add_argument("--check-in-runner", action="store_true",
                        help="check each original in its candidate runner before timing (Settings.check_in_runner)")
    parser.add_argument("--tag", default="", help="a suffix for the output files (one per configuration)")
    parser.add_argument("--beside", type=int, default=0,
                        help="under load: a suite of this many corpus problems on the same GPU meanwhile")
    parser.add_argument("--beside-lead-s", type=float, default=20.0, help="the suite's head start")
    args = parser.parse_args(argv)
    if corpus_missing(args.corpus):
        return 2
    target = "cpu" if args.cpu else _target()
    names = _problems(args.corpus, args.problems, [n for n in args.only.split(",") if n])
    rows = []
    out = Path(args.out) if args.out else run_folder("paired-aa", target)
    with suite_beside(args.beside, target, out, args.beside_lead_s) as load:
        for name in names:
            for graphs in ((False, True) if args.graphs else (False,)):
                rows.append(measure_one(name, args.corpus, target, graphs, args.cpu, args.spares,
                                         args.check_in_runner))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    how = f"Ran {load}.\n\n" if load else ""
    text = (f"# A/A paired timing on {target} ({rows[0].get('device', '?') if rows else '?'})\n\n{how}"
            f"{table(rows)}\n\n{summary(rows)}\n\n## Profile step parts (seconds)\n\n{parts_table(rows)}\n")
    print("\n" + text)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"paired-aa-{target}" + (f"-{args.tag}" if args.tag else "")
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1, default=str))
    (out / f"{stem}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
