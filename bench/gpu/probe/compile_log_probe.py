"""Where a TritonBench-G file's time goes when it runs plainly: one line per Triton compile.

Runs FILE as `python FILE` would (its module-level test included) with a Triton compilation
listener that prints, for every compile or cache hit, the seconds since start, the kernel, its
num_warps, whether the on-disk cache answered, and the compile's own seconds. The summary gives
the wall time, the compile count, the compile seconds summed and the distinct specializations
per kernel. With `--side-by-side` the service's autotune patch
(kernelband.problem.autotune_compile) is installed first, as the sandbox does on a GPU, leaving
out configs still compiling after `--config-compile-s` seconds (0: none left out).

    python -m bench.gpu.probe.compile_log_probe FILE [--side-by-side [--config-compile-s 120]]

Set TRITON_CACHE_DIR to an empty folder for a cold-cache run.
"""

from __future__ import annotations

import argparse
import collections
import json
import runpy
import threading
import time
from typing import Any


def _seconds(times: Any) -> float:
    """A CompileTimes' total (microseconds) in seconds."""
    total = getattr(times, "total", None)
    return float(total) / 1e6 if isinstance(total, int | float) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--side-by-side", action="store_true")
    parser.add_argument("--config-compile-s", type=float, default=0.0)
    args = parser.parse_args()

    from triton import knobs

    if args.side_by_side:
        from kernelband.problem import autotune_compile

        print(json.dumps({"side_by_side": autotune_compile.install(args.config_compile_s),
                          "threads": autotune_compile.workers()}), flush=True)
    start = time.perf_counter()
    lock = threading.Lock()
    compiles: list[dict[str, Any]] = []

    def listener(*, src: Any, metadata: dict[str, Any], metadata_group: Any, times: Any,
                 cache_hit: bool) -> None:
        row = {"t_s": round(time.perf_counter() - start, 2),
               "kernel": str(metadata.get("name", getattr(src, "name", "?"))),
               "num_warps": metadata.get("num_warps"), "cache_hit": cache_hit,
               "compile_s": round(_seconds(times), 2), "hash": str(metadata.get("hash", ""))[:12],
               "thread": threading.current_thread().name}
        with lock:
            compiles.append(row)
        print(json.dumps(row), flush=True)

    knobs.compilation.listener = listener
    error = ""
    try:
        runpy.run_path(args.file, run_name="__main__")
    except BaseException as exc:  # noqa: BLE001 - a diagnostic: report and summarise
        error = f"{type(exc).__name__}: {exc}"[:400]
    wall = time.perf_counter() - start
    built = [c for c in compiles if not c["cache_hit"]]
    per_kernel = collections.Counter(c["kernel"] for c in built)
    print(json.dumps({"wall_s": round(wall, 1), "compiles": len(built),
                      "cache_hits": len(compiles) - len(built),
                      "compile_s_sum": round(sum(c["compile_s"] for c in built), 1),
                      "per_kernel": dict(per_kernel), "error": error}), flush=True)


if __name__ == "__main__":
    main()
