"""Where a timing runner's start and a round's fresh inputs spend their time, on a lent GPU.

    python -m bench.gpu.runner_anatomy --corpus ../shared/corpus/tritonbench-g --problems 8

For each TritonBench-G problem with a performance harness, two runners of its original are
started one after the other through the real sandbox (jail, limits, zygote), and the judge's
clock times each command: the runner's start (`ping`), the device context (`init_device`, only in
the second runner), `load` (the module, the harness and its inputs; in the first runner also the
device context), every timed case's first `prepare` (its compiles: the first runner with the
node's Triton cache as the problem's check left it, the second with the first's compiles in it),
then per case a round's fresh inputs (`prepare` with a pad, as `time_pair` asks each round) and one
call (`run_batch` k=1), and a `prepare` without a pad (nothing handed back to the driver). A `prepare` reply's own split (releasing memory, new inputs, the untimed
call) is the runner's account: reported beside the judge's figure as diagnostics only.

Writes runner-anatomy-<target>.json and .md to --out.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.gpu.paired_aa import _problems, _target, corpus_missing, corpus_parser
from bench.scenarios import run_folder

PAD_BYTES = 3 * 1024 * 1024
FRESH_ROUNDS = 3


def _timed(session: Any, command: dict[str, Any], timeout_s: float = 600.0) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    reply = session.request(command, timeout_s)
    if not reply.value.get("ok"):
        raise RuntimeError(f"{command['cmd']}: {reply.value.get('error')}")
    return reply.value, (time.perf_counter() - start) * 1e3


def one_runner(problem: Any, init_first: bool, device: str = "cuda") -> dict[str, Any]:
    """Start a runner of the original, load it, prepare its timed cases; ms per step."""
    from kernelband.config import get_settings
    from kernelband.profile.paired_runners import HARNESS_SEED, RUNNER_TARGET, spread_cases
    from kernelband.sandbox.limits import SandboxLimits
    from kernelband.sandbox.session import RunnerSession

    limits = replace(SandboxLimits.from_settings(), interpret=device == "cpu", compile_s=0.0, wall_s=600.0)
    row: dict[str, Any] = {}
    start = time.perf_counter()
    session = RunnerSession(RUNNER_TARGET, {"cores": None}, limits)
    try:
        _, _ = _timed(session, {"cmd": "ping"})
        row["start_ms"] = (time.perf_counter() - start) * 1e3
        if init_first:
            row["init_device_ms"] = _timed(session, {"cmd": "init_device", "device": device})[1]
        loaded, row["load_ms"] = _timed(session, {"cmd": "load", "problem": problem.to_dict(), "editable": None,
                                                   "device": device, "graphs": False, "seed": HARNESS_SEED,
                                                   "call": "candidate"})
        cases = spread_cases([str(c) for c in loaded["cases"]], get_settings().measure_max_cases)
        row["cases"] = len(cases)
        row["first_prepare_ms"] = sum(_timed(session, {"cmd": "prepare", "case": c, "seed": 1, "pad": 0})[1]
                                      for c in cases)
        fresh: list[float] = []
        split: dict[str, list[float]] = {"release": [], "inputs": [], "call": []}
        batch: list[float] = []
        for round_no in range(FRESH_ROUNDS):
            for case in cases:
                reply, ms = _timed(session, {"cmd": "prepare", "case": case, "seed": 2 + round_no,
                                             "pad": PAD_BYTES + 512 * round_no})
                fresh.append(ms)
                for part, value in (reply.get("spent_ms") or {}).items():
                    split.setdefault(part, []).append(float(value))
                batch.append(_timed(session, {"cmd": "run_batch", "case": case, "k": 1, "salt": round_no})[1])
        row["fresh_round_ms"] = sum(fresh) / FRESH_ROUNDS  # one runner's share of a round's prepare
        row["fresh_case_ms"] = statistics.median(fresh)
        row["runner_split_ms"] = {p: statistics.median(v) for p, v in split.items() if v}
        row["batch_k1_ms"] = statistics.median(batch)
        # the same without the pad: no memory handed back, the inputs and outputs where they were
        row["kept_case_ms"] = statistics.median(
            _timed(session, {"cmd": "prepare", "case": case, "seed": 9, "pad": 0})[1] for case in cases for _ in range(2))
    finally:
        closing = time.perf_counter()
        session.close()
        row["close_ms"] = (time.perf_counter() - closing) * 1e3
    return row


def measure(name: str, corpus: Path, device: str) -> dict[str, Any]:
    from kernelband.profile.perf_harness import with_perf_harness
    from kernelband.sandbox import load_problem_sandboxed

    source = (corpus / "kernels" / f"{name}.py").read_text()
    problem = load_problem_sandboxed(source, "tritonbench", name)
    problem = with_perf_harness(problem, (corpus / "perf" / f"{name}_perf.py").read_text())
    try:
        return {"problem": name, "first": one_runner(problem, False, device),
                "second": one_runner(problem, True, device)}
    except Exception as exc:  # a row says why; the table goes on
        return {"problem": name, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}


COLUMNS = (("start_ms", "start"), ("init_device_ms", "device context"), ("load_ms", "load"),
           ("first_prepare_ms", "first prepare (compiles)"), ("fresh_round_ms", "fresh inputs per round"),
           ("fresh_case_ms", "per case"),
           ("kept_case_ms", "per case, no pad"), ("batch_k1_ms", "one call"), ("close_ms", "close"))


def table(rows: list[dict[str, Any]]) -> str:
    head = "| problem | runner | cases | " + " | ".join(label for _, label in COLUMNS) + " | runner's split (release / inputs / call) |"
    lines = [head, "| --- | --- | --- |" + " --- |" * (len(COLUMNS) + 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | error: {r['error'][:100]} |" + " - |" * (len(COLUMNS) + 2))
            continue
        for which in ("first", "second"):
            run = r[which]
            cells = " | ".join(f"{run[key]:.1f}" if key in run else "-" for key, _ in COLUMNS)
            split = run.get("runner_split_ms", {})
            said = " / ".join(f"{split.get(p, 0.0):.1f}" for p in ("release", "inputs", "call"))
            lines.append(f"| {r['problem']} | {which} | {run.get('cases', '-')} | {cells} | {said} |")
    ok = [r for r in rows if "error" not in r]
    for which in ("first", "second"):
        medians = []
        for key, _ in COLUMNS:
            values = [r[which][key] for r in ok if key in r[which]]
            medians.append(f"{statistics.median(values):.1f}" if values else "-")
        lines.append(f"| median | {which} | | " + " | ".join(medians) + " | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = corpus_parser(__doc__.splitlines()[0]).parse_args(argv)
    if corpus_missing(args.corpus):
        return 2
    target = "cpu" if args.cpu else _target()
    rows: list[dict[str, Any]] = []
    for name in _problems(args.corpus, args.problems, [n for n in args.only.split(",") if n]):
        rows.append(measure(name, args.corpus, "cpu" if args.cpu else "cuda"))
        print(json.dumps(rows[-1], default=str), flush=True)
    text = f"# Timing runner anatomy on {target} (judge's clock, ms)\n\n{table(rows)}\n"
    print("\n" + text)
    out = Path(args.out) if args.out else run_folder("runner-anatomy", target)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"runner-anatomy-{target}.json").write_text(json.dumps(rows, indent=1, default=str))
    (out / f"runner-anatomy-{target}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
