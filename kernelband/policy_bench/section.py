"""The policy benchmark's whole run and its markdown section: every policy on the SIMULATED
landscapes, a replay table when given, pulls in flight and selection latency."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from kernelband.policy_bench.catalog import SIM_LANDSCAPES
from kernelband.policy_bench.experiments import (
    VARIANTS,
    BatchRow,
    LandscapeResult,
    run_batch,
    run_landscape,
)
from kernelband.policy_bench.latency import time_select
from kernelband.policy_bench.replay import ReplayLandscape, load_replay
from kernelband.policy_bench.report import batch_table, landscape_table, plot_curves, verdicts


def run(quick: bool = False, replay: Path | None = None, plot: Path | None = None) -> str:
    """Run every experiment (and a replay table when given), draw the curves into `plot` when
    given; the section's markdown."""
    started = time.perf_counter()
    seeds, budget = (10, 20) if quick else (50, 100)
    budgets = (20,) if quick else (20, 100)
    results = [run_landscape(land, seeds, budget) for land in SIM_LANDSCAPES.values()]
    simulated, uncovered = True, 0
    if replay is not None:
        problems, simulated = load_replay(replay)
        replay_land = ReplayLandscape(problems, name=f"replay:{replay.name}", simulated=simulated)
        results.append(run_landscape(replay_land, seeds, 20))
        uncovered = replay_land.uncovered
    batch = run_batch(SIM_LANDSCAPES["paper"], seeds, 16 if quick else 48,
                      policies=("kernelband", "ucb1", "hwucb"))
    load = os.getloadavg()  # the latency figures depend on how busy the machine is
    latency = {name: time_select(name, 1000, 50 if quick else 300)
               for name in ("kernelband", "kernelband+prior", "ucb1", "hwucb")}
    if plot is not None:
        plot_curves(results, plot)
    return render(results, budgets, batch, latency, seeds, budget, quick,
                  plot.name if plot else None, replay, simulated, uncovered,
                  time.perf_counter() - started, load)


def render(results: list[LandscapeResult], budgets: tuple[int, ...], batch: list[BatchRow],
           latency: dict[str, dict[str, float]], seeds: int, budget: int, quick: bool,
           plot_name: str | None, replay: Path | None, replay_simulated: bool, uncovered: int,
           elapsed: float, load: tuple[float, float, float]) -> str:
    """The markdown body of the section."""
    rivals = ("random", "ucb1")
    lines = [
        "## Policy benchmark",
        "",
        "**All landscapes below are SIMULATED** (kernelband/policy_bench/roofline.py, "
        "landscapes.py; assumptions in docs/bandit.md, section Simulator)"
        + (". No number here is a GPU measurement." if replay is None else
           f", and the replay table `{replay.name}` is SIMULATED too. No number here is a GPU "
           "measurement." if replay_simulated else
           f"; the replay table `{replay.name}` holds kernel times measured on a GPU: its runs replay "
           "recorded (parent, strategy, child) outcomes and measured times, so only the "
           "`replay:*` rows rest on GPU measurements (the policies' runs over them are "
           "simulated); every other number here is simulated."),
        "",
        f"Command: `python -m bench.policies{' --quick' if quick else ''}` (or `kernelband "
        f"bench-policies`); {seeds} seeds per "
        f"landscape, runs of {budget} pulls (T=20 is the first 20 pulls of the same runs: "
        f"policies do not know the budget), P = 1. Speedup = original true time / true time of "
        "the best kernel chosen by noisy measurement; mean ± 95% CI (Student t); Fast@1 = share "
        f"of seeds with speedup > 1. Machine: {platform.machine()}, Python "
        f"{platform.python_version()}; wall time {elapsed:.0f} s.",
        "",
        "Landscapes: `paper` (roofline model) = memory-/compute-/latency-bound kernel kinds; "
        "time = fixed floor + wasted time per dimension (SM, DRAM, L2); a strategy removes part "
        "of its dimension's waste, so that dimension's h rises toward saturation; a rewrite "
        "aimed at a dimension with little headroom helps rarely (15-80% help odds by headroom); "
        "phi carries the kind and the bottleneck; 30-50% failed generations, 2% timing noise; "
        "`paper-v0` = the first landscape (no floor, flat help odds, true-time noise), kept for "
        "comparison; `families` = the roofline model with three implementation families per "
        "problem (lower floors; 30% of correct tiling/fusion/access_layout rewrites move to "
        "another family, usually slower at first; phi separates families); `hard-to-edit` = "
        "the roofline model where every faster child is 10 points likelier to break on its "
        "next rewrite (optimised code is harder to edit; capped at 90%); `same-prompt` = the "
        "roofline model where asking again for the same (parent, strategy) repeats the first "
        "answer's outcome (failed / faster / not faster) 80% of the time; `no-structure` = the roofline model with h and phi replaced by noise; "
        "`uniform` (v0) = every strategy draws on one shared headroom; "
        "`replay:*` = a recorded table (bench/replay/README.md); unrecorded (parent, strategy) "
        f"pairs count as failures ({uncovered} such pulls over all replay runs). "
        "Strategy-free pulls (bon, refine) pick a uniform strategy in the simulator.",
        "",
        "### Mean best speedup",
        "",
        landscape_table(results, budgets),
        "",
        f"![policy curves](results/{plot_name})" if plot_name else "",
        "",
        "### Does kernelband separate from random and ucb1? (95% CIs)",
        "",
    ]
    for result in results:
        for t in budgets:
            if t < next(iter(result.curves.values())).shape[1]:
                lines += verdicts(result, t, rivals)
    lines += [
        "",
        "Ablations (labelled `ablation:`) change one rule of kernelband: `parent=fastest` takes "
        "the fastest kernel of the chosen cluster instead of the paper's headroom softmax; "
        "`K=1` disables clustering (masks and UCB remain). `signatures=representatives` is the "
        "paper's rule with the signature scope of the authors' release: only kernels that "
        "served as a cluster representative carry their h into the parent softmax; the others "
        "score a neutral 0.",
        "",
        f"### Pulls in flight (paper landscape, {seeds} seeds, "
        f"{16 if quick else 48} pulls: P selections, then P updates)",
        "",
        batch_table(batch),
        "",
        "### Selection latency (frontier of 1,000 candidates, this shared CPU machine)",
        "",
        f"Load average when measured: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / "
        f"15 min) on {os.cpu_count()} cores. Wall p95 includes waiting for a core; CPU p95 is "
        "the work select() itself does. Target: <= 5 ms per decision.",
        "",
        "| policy | select median | select p95 (wall) | select p95 (CPU) | update median | update max (incl. re-clustering / prior refit) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, ms in latency.items():
        lines.append(f"| {name} | {ms['select_median_ms']:.2f} ms | {ms['select_p95_ms']:.2f} ms "
                     f"| {ms['select_cpu_p95_ms']:.2f} ms | {ms['update_median_ms']:.2f} ms "
                     f"| {ms['update_max_ms']:.2f} ms |")
    lines += ["", f"Variants run: {', '.join(VARIANTS)}."]
    return "\n".join(lines)
