"""The scaled-case section of bench/gpu/RESULTS.md: jobs, best speedup per policy, noise, sizes,
its own replay table and the policy benchmark on that measured landscape."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench.gpu.replay_tables import build_replay
from bench.gpu.report import table

POLICIES = ("kernelband", "random", "ucb1")
BENCH_SEEDS = 50  # replay runs per policy for the policy-benchmark table
BENCH_BUDGET = 20


def load_scaled_jobs(folders: list[Path]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(every job that ran, each with its `run` folder and `latest` = no later folder ran the
    same example/policy/seed; the first env)."""
    jobs: dict[tuple[str, str, int], dict[str, Any]] = {}
    every: list[dict[str, Any]] = []
    env: dict[str, Any] = {}
    for folder in folders:
        path = folder / "optimize.json"
        if not env and (folder / "env.json").exists():
            env = json.loads((folder / "env.json").read_text())
        if not path.exists():
            continue
        for job in json.loads(path.read_text()):
            if job.get("status") == "not run":
                continue
            key = (job["example"], job["policy"], job.get("seed", 0))
            if key in jobs:
                jobs[key]["latest"] = False  # a later folder ran the same job again
            jobs[key] = dict(job, run=folder.name, latest=True)
            every.append(jobs[key])
    return every, env


def job_noise(job: dict[str, Any]) -> dict[str, Any]:
    """Measured candidates of one job, how many were flagged noisy, and their CV spread."""
    ms = [c["measurement"] for c in (job.get("records") or {}).get("candidates", [])
          if c.get("measurement") and c["measurement"].get("label") == "measured"]
    cvs = [float(m["cv"]) for m in ms if m.get("cv") is not None]
    return {"measured": len(ms), "noisy": sum(bool(m.get("noisy")) for m in ms),
            "cv_median": statistics.median(cvs) if cvs else None,
            "cv_max": max(cvs) if cvs else None}


def job_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per job."""
    rows = []
    for j in sorted(jobs, key=lambda j: (j["example"], j.get("seed", 0), j["policy"])):
        if j.get("status") == "error":
            rows.append([j["example"], j["policy"], j.get("seed"), "error: " + str(j.get("reason"))[:80],
                         *["-"] * 10])
            continue
        n = job_noise(j)
        rows.append([j["example"], j["policy"], j.get("seed", 0), j.get("status"),
                     f"{j.get('iterations_done')}/{j.get('budget')}", j.get("wall_s"),
                     (j.get("original_ms") or 0) * 1e3, (j.get("best_ms") or 0) * 1e3,
                     j.get("best_speedup"), j.get("held_out"), n["measured"], n["noisy"],
                     n["cv_median"], n["cv_max"], j.get("run")])
    return rows


def best_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """Per example: each policy's best measured speedup, one value per seed run."""
    rows = []
    for example in sorted({j["example"] for j in jobs}):
        cells: list[Any] = [example]
        for policy in POLICIES:
            found = sorted((j.get("seed", 0), j.get("best_speedup")) for j in jobs
                           if j["example"] == example and j["policy"] == policy
                           and j.get("best_speedup") is not None)
            cells.append(", ".join(f"{s:.2f}x (seed {seed})" for seed, s in found) or "not run")
        rows.append(cells)
    return rows


def stage_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """Worker seconds per step of every job that recorded them (median per attempt; parts as
    the worker reported), earlier runs of the same job included."""
    rows = []
    for job in jobs:
        for stage in job.get("stages") or []:
            parts = ", ".join(f"{k} {v:.2f}" for k, v in stage["parts"].items()) or "-"
            wait = stage["wait_median_s"]
            rows.append([job["example"], job["policy"], job["run"], stage["kind"],
                         stage["finished"], f"{stage['work_median_s']:.2f}",
                         f"{stage['work_p90_s']:.2f}", f"{stage['work_total_s']:.1f}",
                         "-" if wait is None else f"{wait:.2f}", parts])
    return rows


def size_lines(jobs: list[dict[str, Any]]) -> list[str]:
    """Which public and held-out cases each scaled example used (from the jobs' own record)."""
    seen: dict[str, dict[str, Any]] = {}
    for j in jobs:
        if j.get("cases"):
            seen.setdefault(j["example"], j["cases"])
    out = []
    for example, cases in sorted(seen.items()):
        pub = ", ".join(c["name"] for c in cases["public"])
        held = ", ".join(c["name"] for c in cases["held_out"])
        out.append(f"- {example}: public {pub}; held-out {held}")
    return out


def policy_bench_table(replay_path: Path, seeds: int = BENCH_SEEDS,
                       budget: int = BENCH_BUDGET) -> str:
    """Mean best speedup ± 95% CI per policy, replaying the measured table (runs simulated)."""
    import numpy as np

    from bench.policy_bench.replay import ReplayLandscape, load_replay
    from bench.policy_bench.runner import run_track, summarise

    problems, simulated = load_replay(replay_path)
    land = ReplayLandscape(problems, name=f"replay:{replay_path.name}", simulated=simulated)
    rows = []
    for policy in POLICIES:
        curves = np.stack([run_track(policy, land, seed, budget) for seed in range(seeds)])
        s = summarise(curves[:, budget])
        rows.append([policy, s.text(), f"{100 * s.fast1:.0f}%"])
    return table(["policy", f"T={budget} mean best speedup ± 95% CI", "Fast@1"], rows)


def render_scaled(jobs: list[dict[str, Any]], env: dict[str, Any], replay: dict[str, Any] | None,
                  replay_path: Path, bench: str | None, notes: Path | None = None) -> str:
    """The markdown of the scaled-case section (job tables: the latest run of each job)."""
    every, jobs = jobs, [j for j in jobs if j.get("latest", True)]
    lines = ["## Scaled-case run (embedded optimize, rules generator, T=20 budget per job)", "",
             f"Device: {env.get('device', 'not recorded')} ({env.get('nvidia_smi', '-')}), torch "
             f"{env.get('torch', '-')}, triton {env.get('triton', '-')}. Every problem is a copy "
             "of its example with only CASES / HELD_OUT_CASES replaced (bench/gpu/scaled.py, "
             "`python -m bench.gpu.validate --optimize --scaled`); examples/ is unchanged. "
             "Sizes used:", "", *size_lines(jobs), "",
             "Speedup = original / best measured time (sum over the two public cases). "
             "`iters` = iterations done / budget: a job also stops at its wall budget "
             "(`--job-wall-s`), so most jobs stopped before T=20. `noisy` = measured candidates "
             "whose CV exceeded 10%; CV = coefficient of variation of one candidate's timed "
             "repetitions.", "",
             table(["example", "policy", "seed", "status", "iters", "wall s", "original µs",
                    "best µs", "speedup", "held-out", "measured", "noisy", "CV median", "CV max",
                    "run"], job_rows(jobs)), "",
             "### Best measured speedup per policy (scaled cases)", "",
             table(["example", *POLICIES], best_rows(jobs)), ""]
    stages = stage_rows(every)
    if stages:
        lines += ["### Where the iteration time goes (scaled cases)", "",
                  "Worker wall seconds per attempt of each step (`kernelband.scheduling.stages`): median, "
                  "p90 and total over the job, the median queue wait, and the median of each "
                  "part the worker reported (check = sandboxed correctness run, static = static "
                  "profile, measure = sandboxed timing and features).", "",
                  table(["example", "policy", "run", "step", "attempts", "median s", "p90 s",
                         "total s", "queue wait s", "parts (median s)"], stages), ""]
    if replay:
        n_rows = sum(len(p["transitions"]) for p in replay["problems"])
        lines += ["### Replay table (scaled cases)", "",
                  f"`{replay_path}`: {len(replay['problems'])} problems, {n_rows} transitions "
                  f"({replay['skipped_generations']} generations skipped: free-choice or "
                  "unfinished).", ""]
    if bench:
        lines += ["### Policy benchmark on the measured replay tables", "", bench, ""]
    notes = notes or Path(__file__).with_name("notes_scaled.md")
    if notes.exists():
        lines += [notes.read_text().rstrip(), ""]
    return "\n".join(lines)


def scaled_report(folders: list[Path], replay_path: Path, bench_replays: list[Path],
                  notes: Path | None = None) -> str:
    """Write the scaled replay table and return the section (empty when nothing ran)."""
    jobs, env = load_scaled_jobs(folders)
    if not jobs:
        return ""
    source = (f"measured on {env.get('device')} (driver {env.get('nvidia_smi')}), torch "
              f"{env.get('torch')}, triton {env.get('triton')}; bench/gpu/validate.py --scaled "
              "embedded optimize jobs, rules generator, scaled cases (bench/gpu/scaled.py)")
    # Candidate ids repeat across runs of one job, so the table pools only the latest runs.
    replay = build_replay([j for j in jobs if j["latest"] and j.get("records")], source)
    replay_path.parent.mkdir(parents=True, exist_ok=True)
    replay_path.write_text(json.dumps(replay, indent=1) + "\n")
    # Each table after the scaled one is written, so it can be one of `bench_replays`.
    bench = "\n\n".join(f"`{path}` ({BENCH_SEEDS} replay runs per policy, T={BENCH_BUDGET}; "
                        "the runs are simulated over measured outcomes):\n\n"
                        + policy_bench_table(path) for path in bench_replays) or None
    return render_scaled(jobs, env, replay, replay_path, bench, notes)
