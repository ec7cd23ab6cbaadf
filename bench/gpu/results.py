"""Write bench/gpu/RESULTS.md and the measured replay table from the steps' JSON files.

The cost-model ranking check runs here (CPU): each measured candidate's editable is estimated
with `estimate_candidate` and ranked against its measured time (Spearman's rho per example).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.gpu.replay_tables import build_replay
from bench.gpu.report import (
    correctness_rows,
    ncu_rows,
    optimize_rows,
    spearman,
    static_rows,
    table,
    timing_rows,
)

MAX_ESTIMATED = 25  # distinct candidates estimated per example (each needs AOT compiles)


def load_steps(folders: list[Path]) -> dict[str, Any]:
    """step name -> its JSON; a later folder's file replaces an earlier one's."""
    steps: dict[str, Any] = {}
    for folder in folders:
        for name in ("env", "examples", "ncu", "optimize"):
            path = folder / f"{name}.json"
            if not path.exists():
                continue
            data = json.loads(path.read_text())
            if name == "optimize":  # per (example, policy): a later run's job replaces an earlier
                data = merge_jobs(steps.get(name) or [], data, str(folder))
            steps[name] = data
            steps[f"{name}_from"] = str(folder)
    return steps


def merge_jobs(earlier: list[dict[str, Any]], later: list[dict[str, Any]],
               folder: str) -> list[dict[str, Any]]:
    """Jobs of both runs, keyed by (example, policy); jobs of `later` that ran win."""
    merged = {(j["example"], j["policy"]): j for j in earlier}
    for job in later:
        key = (job["example"], job["policy"])
        if job.get("status") == "not run" and key in merged:
            continue
        merged[key] = dict(job, run=job.get("run", folder))
    return list(merged.values())


def measured_candidates(jobs: list[dict[str, Any]], example: str) -> list[tuple[str | None, float]]:
    """(editable or None for the original, measured ms) of one example, distinct editables."""
    seen: dict[str | None, float] = {}
    for job in jobs:
        if job.get("example") != example or not job.get("records"):
            continue
        for c in job["records"]["candidates"]:
            m = c.get("measurement")
            if c["status"] != "measured" or not m or m["label"] != "measured":
                continue
            key = None if c["original"] else c["editable"]
            seen.setdefault(key, m["time_ms"])
    return list(seen.items())[:MAX_ESTIMATED]


def rank_check(jobs: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    """Spearman's rho between the cost model's estimate and the measured time, per example."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        return [{"example": "-", "rho": None, "note": "not run: triton was imported without "
                 "TRITON_INTERPRET=1; run --report in its own process"}]
    from bench.gpu.examples_check import EXAMPLES_DIR, load_example
    from kernelband.profile.measure import estimate_candidate

    out = []
    for example in sorted({j["example"] for j in jobs if j.get("records")}):
        problem = load_example(EXAMPLES_DIR / f"{example}.py")
        pairs, errors = [], 0
        for editable, measured_ms in measured_candidates(jobs, example):
            try:
                estimate, _ = estimate_candidate(problem, editable, target)
            except Exception:  # an estimate failure is counted, not fatal
                errors += 1
                continue
            pairs.append((estimate.time_ms, measured_ms))
        rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None
        out.append({"example": example, "rho": rho, "n": len(pairs), "estimate_errors": errors})
        print(f"[report] rank check {example}: rho={rho} n={len(pairs)}", flush=True)
    return out


def _env_lines(env: dict[str, Any]) -> list[str]:
    keys = ("device", "capability", "multiprocessors", "memory_gib", "nvidia_smi", "torch",
            "torch_cuda", "triton", "python", "kernel", "ncu", "litellm_stubbed")
    return [f"- {k}: {env.get(k, 'not recorded')}" for k in keys]


def _section(title: str, note: str, body: str | None) -> list[str]:
    return [f"## {title}", "", note, "", body if body else "Not run.", ""]


def notes_path(results: Path, kind: str = "notes") -> Path:
    """Hand-written findings beside a report: notes.md for RESULTS.md, notes-h100.md for RESULTS-h100.md."""
    suffix = results.stem.removeprefix("RESULTS")
    return Path(__file__).with_name(f"{kind}{suffix}.md")


def render(steps: dict[str, Any], ranks: list[dict[str, Any]] | None, replay: dict[str, Any] | None,
           replay_path: Path, notes: Path | None = None) -> str:
    """The whole RESULTS.md text (`notes`: the findings appended verbatim, default notes.md)."""
    env, examples = steps.get("env") or {}, steps.get("examples")
    lines = ["# GPU validation results", "",
             "Written by `python -m bench.gpu.validate --report` from the JSON of "
             "`make gpu-validate` on a lent GPU; every number below was measured there unless "
             "labelled estimated. Steps that did not run say `Not run`.", "", "## Machine", "",
             *(_env_lines(env) if env else ["Not run."]), ""]
    lines += _section("Correctness (evaluator, original kernels, public + held-out cases, 3 seeds)",
                      "", table(["example", "correct", "reason", "cases", "held-out", "wall s"],
                                correctness_rows(examples)) if examples else None)
    lines += _section(
        "Timing: our CUDA-event backend vs triton.testing.do_bench (medians, µs)",
        "Both flush L2 before each timed run. `ours again` is a second run of our backend after "
        "do_bench (run-to-run spread); `A/A` is our paired A/B ratio of the kernel against itself "
        "(ideal 1.0). Target: ratio within 3%.",
        table(["example", "case", "ours µs", "ours again µs", "do_bench µs", "ours/do_bench",
               "within 3%", "CV", "A/A ratio"], timing_rows(examples)) if examples else None)
    lines += _section(
        "Static profile vs the loaded kernel",
        "Static: AOT triton.compile for the device's arch + cuobjdump. Loaded: the CompiledKernel "
        "after launch (n_regs from the CUDA driver, shared from its metadata).",
        table(["example", "kernel", "static regs", "driver regs", "static smem", "driver smem",
               "regs match", "smem match"], static_rows(examples)) if examples else None)
    ncu = steps.get("ncu")
    lines += _section("Nsight Compute: h per example (longest launch, --clock-control none)", "",
                      table(["example", "kernel", "SM %", "DRAM %", "L2 %", "ncu µs", "launches"],
                            ncu_rows(ncu)) if ncu else None)
    jobs = steps.get("optimize")
    lines += _section(
        "Embedded optimize — tiny-case run (the examples' own cases; rules generator, T=budget "
        "per job, seed 0)",
        "Speedup = original / best measured time (sum over public cases) on the GPU. Jobs marked "
        "`not run` did not fit the device time box. The scaled-case run is further down.",
        table(["example", "policy", "status", "iterations", "original µs", "best µs", "speedup",
               "label", "held-out", "lineage", "run"], optimize_rows(jobs)) if jobs else None)
    rank_body = None
    if ranks:
        rank_body = table(["example", "Spearman rho (estimate vs measured)", "candidates",
                           "estimate errors"],
                          [[r["example"], r.get("rho"), r.get("n"), r.get("estimate_errors")]
                           for r in ranks])
    lines += _section("Cost-model ranking vs measured ranking",
                      "Estimate: `estimate_candidate` (labelled estimated, computed on the CPU "
                      "from the recorded editables); measured: the job's GPU time.", rank_body)
    if replay:
        n_rows = sum(len(p["transitions"]) for p in replay["problems"])
        lines += ["## Replay table (tiny-case run)", "",
                  f"`{replay_path}`: {len(replay['problems'])} problems, {n_rows} transitions "
                  f"({replay['skipped_generations']} generations skipped: free-choice or "
                  "unfinished). Run the policy benchmark on it with "
                  f"`kernelband bench-policies --replay {replay_path}`.", ""]
    notes = notes or Path(__file__).with_name("notes.md")
    if notes.exists():  # hand-written findings about the recorded runs
        lines += [notes.read_text().rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(folders: list[Path], results: Path, replay_path: Path,
                 scaled_folders: list[Path] | None = None, scaled_replay: Path | None = None) -> None:
    """Read the steps, run the rank check, write the replay tables and RESULTS.md."""
    steps = load_steps(folders)
    jobs = steps.get("optimize") or []
    env = steps.get("env") or {}
    replay = None
    ranks = None
    if any(j.get("records") for j in jobs):
        source = (f"measured on {env.get('device')} (driver {env.get('nvidia_smi')}), torch "
                  f"{env.get('torch')}, triton {env.get('triton')}; bench/gpu/validate.py "
                  "embedded optimize jobs, rules generator")
        replay = build_replay(jobs, source)
        replay_path.parent.mkdir(parents=True, exist_ok=True)
        replay_path.write_text(json.dumps(replay, indent=1) + "\n")
        target = next((j["target"] for j in jobs if j.get("target")), "h100")
        ranks = rank_check(jobs, target)
    text = render(steps, ranks, replay, replay_path, notes_path(results))
    if scaled_folders and scaled_replay is not None:
        from bench.gpu.scaled_report import scaled_report

        bench = [p for p in (replay_path, scaled_replay) if p.exists() or p == scaled_replay]
        text = text.rstrip() + "\n\n" + scaled_report(scaled_folders, scaled_replay, bench,
                                                       notes_path(results, "notes_scaled"))
    results.write_text(text.rstrip() + "\n")
    print(f"[report] wrote {results}" + (f" and {replay_path}" if replay else ""), flush=True)
