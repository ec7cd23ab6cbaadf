"""Nsight Compute on each example's original kernel; h = (SM, DRAM, L2) throughput in % of peak.

ncu runs with `--clock-control none`: the card's clocks are left as found (the project's
`run_ncu` uses ncu's default, which locks them; see RESULTS.md).
Child mode: `python -m bench.gpu.ncu_step EXAMPLE.py` runs every public case once on the GPU.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

NCU_TIMEOUT_S = 60.0


def ncu_argv(ncu: str, example: Path) -> list[str]:
    """The ncu command line that profiles one example's child run."""
    from kernelband.profile.ncu import METRICS

    return [ncu, "--csv", "--page", "raw", "--target-processes", "all", "--clock-control", "none",
            "--metrics", ",".join(METRICS), sys.executable, "-m", "bench.gpu.ncu_step", str(example)]


def h_of(kernels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """h of the example: the metrics of its longest profiled launch."""
    timed = [k for k in kernels if k["metrics"].get("time_ms") is not None]
    if not timed:
        return None
    longest = max(timed, key=lambda k: k["metrics"]["time_ms"])
    m = longest["metrics"]
    return {"kernel": longest["name"], "sm_pct": m.get("sm_pct"), "dram_pct": m.get("dram_pct"),
            "l2_pct": m.get("l2_pct"), "time_ms": m.get("time_ms"),
            "registers_per_thread": m.get("registers_per_thread"),
            "achieved_occupancy_pct": m.get("achieved_occupancy_pct")}


def profile_example(ncu: str, example: Path) -> dict[str, Any]:
    """Run ncu on one example; the outcome says why when no kernel was profiled."""
    from kernelband.profile.ncu import parse_ncu_csv

    started = time.perf_counter()
    try:
        done = subprocess.run(ncu_argv(ncu, example), capture_output=True, text=True,
                              timeout=NCU_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"example": example.stem, "ok": False, "reason": f"timeout after {NCU_TIMEOUT_S:.0f}s"}
    kernels = [{"name": k.name, "metrics": k.metrics} for k in parse_ncu_csv(done.stdout)]
    row: dict[str, Any] = {"example": example.stem, "ok": bool(kernels), "kernels": kernels,
                           "h": h_of(kernels), "wall_s": round(time.perf_counter() - started, 1)}
    if not kernels:
        row["reason"] = f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-600:]}"
    return row


def run_ncu_step(paths: list[Path]) -> list[dict[str, Any]]:
    """ncu over every example, or one row saying ncu is missing."""
    from kernelband.profile.ncu import find_ncu

    ncu = find_ncu()
    if ncu is None:
        return [{"example": p.stem, "ok": False, "reason": "ncu not found"} for p in paths]
    rows = []
    for path in paths:
        rows.append(profile_example(ncu, path))
        print(f"[ncu] {path.stem}: ok={rows[-1]['ok']} ({rows[-1].get('wall_s')} s)", flush=True)
    return rows


def _child(example: Path) -> None:
    """Run every public case of `example` once on the GPU (the process ncu profiles)."""
    import tempfile

    import torch

    from bench.gpu.examples_check import load_example
    from kernelband.problem.runtime import load_runtime

    problem = load_example(example)
    with tempfile.TemporaryDirectory() as workdir:
        runtime = load_runtime(problem, None, "cuda", workdir=Path(workdir))
        for case in problem.cases:
            runtime.candidate(runtime.inputs(case, 0))
        torch.cuda.synchronize()


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
