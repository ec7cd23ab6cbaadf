"""Fleet-scaling SIMULATION: N simulated GPU workers share a queue of evaluations.

Each worker is a thread that takes the next evaluation from one shared queue (as Celery workers
with `-c 1` and prefetch 1 do) and, instead of running a kernel, sleeps for a time drawn from a
lognormal distribution around 2 s (sigma 0.4), scaled down by `scale` so the run is short.
Every N gets the same list of durations. Measured: wall time, busy fraction (time spent
"evaluating" over N x wall) and scaling efficiency T1 / (N x TN). No kernel runs: SIMULATED.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from typing import Any

import numpy as np

from bench.common import RESULTS_DIR, fmt, markdown_table, new_figure, save_figure, verdict

MEDIAN_S, SIGMA = 2.0, 0.4  # a GPU profile step: ~2 s median with a moderate right tail


def durations(evaluations: int, scale: float, seed: int = 0) -> list[float]:
    """Simulated evaluation times in seconds (lognormal around MEDIAN_S, times `scale`)."""
    rng = np.random.default_rng(seed)
    return list(rng.lognormal(np.log(MEDIAN_S), SIGMA, evaluations) * scale)


def _worker(tasks: queue.Queue[float], busy: list[float], slot: int) -> None:
    while True:
        try:
            duration = tasks.get_nowait()
        except queue.Empty:
            return
        start = time.perf_counter()
        time.sleep(duration)  # the simulated profile step
        busy[slot] += time.perf_counter() - start


def run_fleet(workers: int, work: list[float]) -> dict[str, Any]:
    """Run `work` on `workers` simulated workers; wall time and busy fraction."""
    tasks: queue.Queue[float] = queue.Queue()
    for duration in work:
        tasks.put(duration)
    busy = [0.0] * workers
    threads = [threading.Thread(target=_worker, args=(tasks, busy, i), daemon=True)
               for i in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return {"workers": workers, "evaluations": len(work), "wall_s": wall,
            "busy_fraction": sum(busy) / (workers * wall),
            "ideal_wall_s": max(sum(work) / workers, max(work))}


def run_scaling(worker_counts: tuple[int, ...], evaluations: int,
                scale: float) -> dict[str, Any]:
    """Every fleet size on the same simulated workload; efficiency relative to one worker."""
    work = durations(evaluations, scale)
    rows = [run_fleet(n, work) for n in worker_counts]
    base = next((r for r in rows if r["workers"] == 1), None)
    for row in rows:
        row["efficiency"] = (base["wall_s"] / (row["workers"] * row["wall_s"])
                             if base else float("nan"))
        print(json.dumps(row), flush=True)
    return {"label": "SIMULATED evaluation (sleep), not kernels", "median_s": MEDIAN_S,
            "sigma": SIGMA, "scale": scale, "evaluations": evaluations,
            "mean_eval_s": float(np.mean(work)), "rows": rows}


def targets(data: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """busy >= 90% at 64 workers; efficiency >= 0.9 for every N <= 16."""
    by_n = {r["workers"]: r for r in data["rows"]}
    busy = by_n.get(64)
    small = [r for r in data["rows"] if 1 < r["workers"] <= 16]
    low = min(small, key=lambda r: r["efficiency"]) if small else None
    return [
        ("busy >= 90% at 64 workers", None if busy is None else busy["busy_fraction"] >= 0.9,
         "64 not run" if busy is None else f"{100 * busy['busy_fraction']:.1f}%"),
        ("efficiency >= 0.9 up to 16 workers", None if low is None else low["efficiency"] >= 0.9,
         "-" if low is None else f"lowest {low['efficiency']:.3f} at N={low['workers']}"),
    ]


def section(data: dict[str, Any]) -> str:
    """The RESULTS.md section: method, table and plot."""
    rows = [(r["workers"], r["evaluations"], fmt(r["wall_s"], 2), fmt(r["ideal_wall_s"], 2),
             f"{100 * r['busy_fraction']:.1f}%", fmt(r["efficiency"], 3)) for r in data["rows"]]
    table = markdown_table(("workers", "evaluations", "wall s", "ideal wall s", "busy",
                            "efficiency"), rows)
    lines = [f"- {name}: **{'not evaluated' if met is None else verdict(met)}** ({why})"
             for name, met, why in targets(data)]
    return ("## Fleet scaling (SIMULATED evaluation)\n\n"
            "**Evaluation is simulated**: each worker thread sleeps instead of running a kernel, "
            f"for a lognormal time (median {data['median_s']:g} s, sigma {data['sigma']:g}) "
            f"scaled by {data['scale']:g} (mean {1000 * data['mean_eval_s']:.1f} ms here); every "
            f"fleet size gets the same {data['evaluations']} durations from one shared queue. "
            "Efficiency = T1 / (N x TN); ideal wall = max(total work / N, longest evaluation). "
            "This measures the work distribution only; the scheduler's own rate (next section) "
            "caps how many results per second a real fleet can be fed.\n\n"
            f"Command: `python -m bench.fleet_scaling`.\n\n{table}\n\n" + "\n".join(lines)
            + "\n\n![fleet scaling](results/fleet_scaling.png)")


def plot(data: dict[str, Any]) -> None:
    """Busy fraction and efficiency against fleet size."""
    fig, (ax,) = new_figure()
    n = [r["workers"] for r in data["rows"]]
    ax.plot(n, [r["busy_fraction"] for r in data["rows"]], "o-", label="busy fraction")
    ax.plot(n, [r["efficiency"] for r in data["rows"]], "s-", label="scaling efficiency")
    ax.axhline(0.9, ls="--", c="grey", label="target 0.9")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("simulated GPU workers")
    ax.legend()
    ax.set_title("Fleet scaling (SIMULATED evaluation)")
    save_figure(fig, "fleet_scaling.png")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: --quick runs 128 evaluations on 1 and 4 workers."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="128 evaluations, 1 and 4 workers")
    parser.add_argument("--scale", type=float, default=1 / 200, help="time scale of a 2 s eval")
    args = parser.parse_args(argv)
    counts, evaluations = ((1, 4), 128) if args.quick else ((1, 4, 16, 64), 2048)
    data = run_scaling(counts, evaluations, args.scale)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "fleet_scaling.json").write_text(json.dumps(data, indent=2))
    return data


if __name__ == "__main__":
    main()
