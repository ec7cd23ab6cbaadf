"""Candidates that try to change their own measured speedup, on a lent GPU (one command):

    python -m bench.gpu.paired_adversarial [--cpu]

examples/vector_add.py measured through `measure_candidate` (two runners, the judge's clock)
against: itself (A/A); the same kernel launched twice (truly ~2x slower); the same kernel with
every timer of its process rewritten (time.perf_counter, torch.cuda.Event, the runner's reply
writer: the "fake 5x" of the trusted-judge issue); the same kernel with threads meant to take
the original's cores; and a runner claiming more time than the judge saw. Prints one row per
candidate (stored speedup or rejection reason) and writes paired-adversarial-<target>.md to --out.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=4, num_stages=1)\n"
FORGER = '''
import json as _json
import time as _time
import torch as _torch

_real = _time.perf_counter
_time.perf_counter = lambda: _real() / 5.0
class _Event:
    def __init__(self, *args, **kwargs): pass
    def record(self, *args, **kwargs): pass
    def synchronize(self): pass
    def elapsed_time(self, other): return 0.001
_torch.cuda.Event = _Event
_dumps = _json.dumps
def _forged(obj, *args, **kwargs):
    if isinstance(obj, dict) and "runner_ms" in obj:
        obj = {**obj, "runner_ms": obj["runner_ms"] / SCALE}
    return _dumps(obj, *args, **kwargs)
_json.dumps = _forged
'''
SLOWER = '''
import threading as _threading
import time as _time
def _spin():
    while True:
        _time.perf_counter()
for _ in range(4):
    _threading.Thread(target=_spin, daemon=True).start()
'''


def candidates(editable: str) -> dict[str, str | None]:
    return {
        "A/A (the original)": None,
        "launched twice (~2x slower)": editable.replace(LAUNCH, LAUNCH + LAUNCH),
        "timers and replies forged (claims 5x)": FORGER.replace("SCALE", "5.0") + editable,
        "threads against the original": SLOWER + editable,
        "claims more time than the judge saw": FORGER.replace("/ SCALE", "* 50.0 + 1000.0") + editable,
    }


def measure(problem: Any, editable: str | None, cpu: bool) -> str:
    from kernelband.evaluate.verified_timing import TimingRejected
    from kernelband.profile.measurement import TimingCheckError

    try:
        if cpu:
            from kernelband.profile.paired_result import measure_speedup
            from kernelband.profile.paired_runners import PairedConfig

            m = measure_speedup(problem, editable, "cpu", target="cpu", device_name="host",
                                config=PairedConfig(rounds=10, batch_ms=60.0, clock="cpu"))
        else:
            from kernelband.profile import measure_candidate

            m = measure_candidate(problem, editable or problem.editable, _target(), hardware_signature=False)[0]
    except (TimingRejected, TimingCheckError) as rej:
        return f"rejected: {rej.reason}"
    assert m.speedup is not None
    claims = m.checks.get("runner_claims", {}).get("candidate")
    return f"{m.speedup.describe()} (runner claimed {claims} of the judge's time)"


def _target() -> str:
    """The node's KernelBand target, from its GPU's name (H100, else H200)."""
    from kernelband.profile.paired_gpu import gpu_name

    return "h100" if "H100" in gpu_name("h200").upper() else "h200"


def main(argv: list[str] | None = None) -> int:
    from kernelband.problem import load_problem

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="rehearse on the CPU interpreter")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / "bench" / "gpu")))
    args = parser.parse_args(argv)
    problem = load_problem((ROOT / "examples" / "vector_add.py").read_text(), "native", "vector_add")
    lines = ["| candidate | stored speedup against the original, or rejection |", "| --- | --- |"]
    for name, editable in candidates(problem.editable).items():
        lines.append(f"| {name} | {measure(problem, editable, args.cpu)} |")
        print(lines[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    target = "cpu" if args.cpu else _target()
    (args.out / f"paired-adversarial-{target}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
