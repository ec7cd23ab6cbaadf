"""Every registered policy on a recorded replay corpus, beside the SIMULATED landscapes, and
the default policy by that evidence. A corpus whose provenance.json does not say `measured`
holds cost-model estimates and is labelled so."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kernelband.bandit import DEFAULT_POLICY, POLICIES
from kernelband.policy_bench.catalog import SIM_LANDSCAPES
from kernelband.policy_bench.experiments import LandscapeResult
from kernelband.policy_bench.landscapes import Landscape
from kernelband.policy_bench.replay import ReplayLandscape, load_replay
from kernelband.policy_bench.runner import Summary, paired_gain, run_track

BUDGETS = (10, 20, 50)
DECIDING_T = 20
RIVALS = ("ucb1", "kernelband")
OWN = "hwucb"  # the service's own policy


@dataclass
class Corpus:
    """The replayed corpus and what its numbers are."""

    path: Path
    label: str  # measured | estimated
    provenance: dict[str, Any]
    landscape: ReplayLandscape
    problems: int
    transitions: int
    cvs: list[float]  # timing coefficient of variation of every measured kernel


def load_corpus(path: Path) -> Corpus:
    """A recorded corpus folder (bench/replay/README.md) and what its numbers are."""
    if not path.is_dir():
        raise SystemExit(f"no recorded corpus at {path}; pass --replay DIR, a folder in "
                         "the format of bench/replay/README.md")
    problems, _ = load_replay(path)
    prov_file = path / "provenance.json"
    provenance = json.loads(prov_file.read_text()) if prov_file.exists() else {}
    label = str(provenance.get("label", "estimated"))
    rows = sum(len(v) for p in problems for v in p.transitions.values())
    land = ReplayLandscape(problems, name=f"replay:{path.name}", simulated=False)
    cvs = [float(k["cv"]) for p in problems for k in p.kernels.values() if "cv" in k]
    return Corpus(path, label, provenance, land, len(problems), rows, cvs)


def run_policies(landscape: Landscape, seeds: int, budget: int) -> LandscapeResult:
    """Every registered policy with its default parameters (uncovered pulls counted per policy
    on a replay landscape, in `UNCOVERED`)."""
    result = LandscapeResult(landscape.name)
    for name in POLICIES:
        before = getattr(landscape, "uncovered", 0)
        result.curves[name] = np.stack([run_track(name, landscape, s, budget) for s in range(seeds)])
        if isinstance(landscape, ReplayLandscape):
            UNCOVERED[name] = (landscape.uncovered - before) / (seeds * budget)
    return result


UNCOVERED: dict[str, float] = {}  # policy -> share of its replay pulls beyond the recorded depth


def not_worse(ours: Summary, other: Summary) -> bool:
    """Not significantly worse: our 95% CI reaches the other's (overlap, or above it)."""
    return ours.high >= other.low


def worse_on(name: str, simulated: list[LandscapeResult]) -> list[str]:
    """Simulated landscapes where `name` is significantly worse than ucb1 or kernelband at T=20."""
    return [f"{r.name} (vs {rival}: {r.at(name, DECIDING_T).text()} < {r.at(rival, DECIDING_T).text()})"
            for r in simulated for rival in RIVALS
            if rival != name and not not_worse(r.at(name, DECIDING_T), r.at(rival, DECIDING_T))]


def decide(measured: LandscapeResult, simulated: list[LandscapeResult]) -> list[str]:
    """The evidence for the default policy, in sentences with the numbers."""
    at = {name: measured.at(name, DECIDING_T) for name in measured.curves}
    leader = max(at, key=lambda n: at[n].mean)
    lines = [f"- Leader on the replayed corpus at T={DECIDING_T}: `{leader}` {at[leader].text()}."]
    for rival in RIVALS:
        if rival == leader:
            continue
        word = ("beats (non-overlapping CIs)" if at[leader].low > at[rival].high
                else "does not separate from (overlapping CIs)")
        gain = paired_gain(measured.curves[leader][:, DECIDING_T], measured.curves[rival][:, DECIDING_T])
        lines.append(f"  - {word} `{rival}` {at[rival].text()}; paired difference over the same "
                     f"seeds {gain.mean:+.3f} ± {gain.ci95:.3f}.")
    worse = worse_on(leader, simulated)
    lines.append(f"- `{leader}` on the simulated landscapes at T={DECIDING_T}: "
                 + ("not worse than " + " or ".join(RIVALS) + " on any."
                    if not worse else "significantly worse on " + "; ".join(worse) + "."))
    if OWN in at and leader != OWN:
        for rival in RIVALS:
            gains = [paired_gain(measured.curves[OWN][:, t], measured.curves[rival][:, t]) for t in BUDGETS]
            lines.append(f"- `{OWN}` minus `{rival}` on the replayed corpus, paired over the same "
                         "seeds: " + ", ".join(f"T={t} {g.mean:+.3f} ± {g.ci95:.3f}"
                                               for t, g in zip(BUDGETS, gains, strict=True)) + ".")
    eligible = [n for n in at if not worse_on(n, simulated)]
    if eligible:
        best = max(eligible, key=lambda n: at[n].mean)
        lines.append(f"- Best on the replayed corpus at T={DECIDING_T} among the policies not "
                     f"significantly worse than {' or '.join(RIVALS)} on any simulated landscape "
                     f"({', '.join(f'`{n}`' for n in eligible)}): `{best}` {at[best].text()}.")
    lines.append(f"- Default policy for new jobs (kernelband.bandit.DEFAULT_POLICY): `{DEFAULT_POLICY}`.")
    return lines


def table(results: list[LandscapeResult], budgets: tuple[int, ...]) -> str:
    head = "| landscape | policy | " + " | ".join(f"T={t} speedup | T={t} Fast@1" for t in budgets) + " |"
    lines = [head, "|" + " --- |" * (2 + 2 * len(budgets))]
    for result in results:
        for name in result.curves:
            cells = []
            for t in budgets:
                s = result.at(name, t)
                cells += [s.text(), f"{100 * s.fast1:.0f}%"]
            lines.append(f"| {result.name} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(corpus: Corpus, measured: LandscapeResult, simulated: list[LandscapeResult],
           seeds: int, sim_seeds: int, elapsed: float) -> str:
    prov = corpus.provenance
    what = (f"**Kernel times MEASURED** on {prov.get('device', '?')} (torch {prov.get('torch', '?')}, "
            f"triton {prov.get('triton', '?')}, {prov.get('date', '?')}; timing: {prov.get('timing', '?')})"
            if corpus.label == "measured" else
            "**Kernel times ESTIMATED** (the service's cost model; recorded on the CPU in the "
            "Triton interpreter, no GPU): the replay shows the pipeline, not GPU evidence")
    return "\n".join([
        "## Measured replay benchmark",
        "",
        f"Corpus: `{_shown(corpus.path)}`, "
        f"{corpus.problems} TritonBench-G problems, {corpus.transitions} recorded transitions. "
        f"{what}. The rewrites come from the rules generator (no LLM): every rewrite it can "
        "apply to each expanded parent was recorded (breadth-first to depth "
        f"{prov.get('depth', '?')}), so no policy is favoured by what was recorded; a pull "
        "from a kernel beyond that depth has no rows and counts as a failure "
        f"({corpus.landscape.uncovered} such pulls over all runs). h is the cost-model estimate."
        + (f" Timing spread: the median kernel's coefficient of variation over its timed runs is "
           f"{float(np.median(corpus.cvs)):.2f}, and {100 * float(np.mean(np.array(corpus.cvs) > 0.1)):.0f}% "
           "of kernels exceed 0.10." if corpus.cvs else ""),
        "",
        "Command: `python -m bench.policies --measured` (or `kernelband bench-policies "
        f"--measured DIR`); every registered policy with its "
        f"default parameters, {seeds} seeds (seed i replays problem i mod {corpus.problems}), "
        f"runs of {max(BUDGETS)} pulls (T=10 and T=20 are their first pulls), P = 1; mean best "
        "speedup ± 95% CI (Student t), Fast@1 = share of seeds with speedup > 1. Beside it the "
        f"SIMULATED landscapes at T={DECIDING_T} ({sim_seeds} seeds). Wall time {elapsed:.0f} s.",
        "",
        table([measured], BUDGETS),
        "",
        "Share of each policy's replayed pulls (T=50 runs) that asked a kernel beyond the "
        "recorded depth, counted as failures: "
        + ", ".join(f"`{n}` {100 * v:.0f}%" for n, v in UNCOVERED.items()) + ".",
        "",
        f"### The same policies on the SIMULATED landscapes (T={DECIDING_T})",
        "",
        table(simulated, (DECIDING_T,)),
        "",
        "### Default by evidence",
        "",
        *decide(measured, simulated),
    ])


def _shown(path: Path) -> Path:
    """The corpus path relative to the working directory when it lies below it."""
    path = path.resolve()
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def run(replay: Path, quick: bool = False) -> str:
    """Run both comparisons and return the section's markdown."""
    started = time.perf_counter()
    corpus = load_corpus(replay)
    per_problem = math.ceil((20 if quick else 50) / corpus.problems)
    seeds = per_problem * corpus.problems  # every problem equally often, at least 50 seeds
    measured = run_policies(corpus.landscape, seeds, max(BUDGETS))
    sim_seeds = 20 if quick else 50
    simulated = [run_policies(land, sim_seeds, DECIDING_T) for land in SIM_LANDSCAPES.values()]
    return render(corpus, measured, simulated, seeds, sim_seeds, time.perf_counter() - started)
