"""Latency of the static profile per candidate: cold (nothing cached) and cached.

Run: `make bench SCENARIO=static-profile-latency [ARGS="--examples softmax matmul"]`
A candidate here is one bundled native example; its launches are captured dry (no kernel runs)
and each distinct launch is compiled for sm_80, sm_89 and sm_90. "Cold" uses a fresh Triton
cache and a fresh profile cache; "cached" repeats the same calls in the same process (memory
cache) and in a new process view of the disk cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("a100", "rtx4090", "h100")


def _records(name: str, workdir: str) -> list[Any]:
    """Dry-captured launches of every public case (the module files stay in `workdir`)."""
    from kernelband.problem import load_problem
    from kernelband.problem.runtime import load_runtime
    from kernelband.profile.measure import capture_case

    problem = load_problem((ROOT / "examples" / f"{name}.py").read_text(), "native", name)
    runtime = load_runtime(problem, None, "cpu", workdir=workdir)
    return [r for case in problem.cases for r in capture_case(runtime, case, execute=False)]


def _profile_all(records: list[Any], cache: Path) -> float:
    from kernelband.profile.archs import GPUS
    from kernelband.profile.static import static_profile

    started = time.perf_counter()
    for target in TARGETS:
        for record in records:
            static_profile(record, GPUS[target].cc, cache)
    return time.perf_counter() - started


def measure(names: list[str]) -> dict[str, Any]:
    """Per example: launches, cold seconds, memory-cached ms and disk-cached ms for 3 archs."""
    from kernelband.profile.static import clear_memory_cache

    rows = {}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            records = _records(name, tmp)
            os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")  # cold Triton cache too
            cache = Path(tmp) / "profiles"
            clear_memory_cache()
            cold = _profile_all(records, cache)
            memory = _profile_all(records, cache)
            clear_memory_cache()
            disk = _profile_all(records, cache)
        compiles = len(records) * len(TARGETS)
        rows[name] = {"launches": len(records), "compiles": compiles, "cold_s": round(cold, 3),
                      "cold_per_compile_s": round(cold / compiles, 3), "memory_cached_ms": round(memory * 1e3, 2),
                      "disk_cached_ms": round(disk * 1e3, 2)}
        print(json.dumps({name: rows[name]}), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", nargs="*", default=sorted(p.stem for p in (ROOT / "examples").glob("*.py")))
    args = parser.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        _records(args.examples[0], tmp)  # import torch and triton once, outside the timings
    rows = measure(args.examples)
    per_compile = [r["cold_per_compile_s"] for r in rows.values()]
    print(json.dumps({"cpu_count": os.cpu_count(), "median_cold_per_compile_s": statistics.median(per_compile),
                      "max_memory_cached_ms": max(r["memory_cached_ms"] for r in rows.values()),
                      "max_disk_cached_ms": max(r["disk_cached_ms"] for r in rows.values())}))


if __name__ == "__main__":
    main()
