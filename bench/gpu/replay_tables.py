"""Turn recorded optimize jobs into a replay table (format: bench/replay/README.md)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

FORMAT = "kernelband-replay/1"
ORIGINAL_ID = "orig"
STRATEGIES = ("tiling", "vectorization", "fusion", "pipeline", "reordering", "access_layout")


def _kernel_entry(measurement: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"time_ms": measurement["time_ms"]}
    features = measurement.get("features") or {}
    if features.get("phi"):
        entry["phi"] = [float(v) for v in features["phi"]]
    if features.get("h"):
        entry["h"] = [float(v) for v in features["h"]]
    return entry


def _measured(candidate: dict[str, Any]) -> bool:
    m = candidate.get("measurement") or {}
    return candidate.get("status") == "measured" and m.get("label") == "measured"


def job_rows(job: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], int]:
    """(kernels, transitions, skipped) of one job; the original is `orig`, others `<policy>-c<id>`."""
    candidates = job["records"]["candidates"]
    ids = {c["id"]: ORIGINAL_ID if c["original"] else f"{job['policy']}-c{c['id']}" for c in candidates}
    kernels = {ids[c["id"]]: _kernel_entry(c["measurement"]) for c in candidates if _measured(c)}
    by_decision = {c["decision_id"]: c for c in candidates if c.get("decision_id")}
    rows, skipped = [], 0
    for gen in job["records"]["generations"]:
        parent = ids.get(gen["parent_id"])
        if gen["strategy"] not in STRATEGIES or parent not in kernels or gen["state"] == "pending":
            skipped += 1  # free-choice pulls, unmeasured parents and unfinished pulls
            continue
        child = by_decision.get(gen["decision_id"])
        child_id = ids[child["id"]] if child is not None and _measured(child) else None
        rows.append({"parent": parent, "strategy": gen["strategy"], "child": child_id})
    return kernels, rows, skipped


def build_replay(jobs: list[dict[str, Any]], source: str) -> dict[str, Any]:
    """One replay problem per example, pooling its jobs; the original's time is the median of
    its measurements across jobs (it is the same code)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs:
        if job.get("records"):
            grouped[job["example"]].append(job)
    problems, skipped_total = [], 0
    for example, group in sorted(grouped.items()):
        kernels: dict[str, dict[str, Any]] = {}
        transitions: list[dict[str, Any]] = []
        originals: list[dict[str, Any]] = []
        for job in group:
            job_kernels, rows, skipped = job_rows(job)
            skipped_total += skipped
            if ORIGINAL_ID in job_kernels:
                originals.append(job_kernels.pop(ORIGINAL_ID))
            kernels.update(job_kernels)
            transitions.extend(rows)
        if not originals:
            continue  # the original was never measured: nothing can be replayed from it
        kernels[ORIGINAL_ID] = dict(originals[0],
                                    time_ms=statistics.median(o["time_ms"] for o in originals))
        problems.append({"name": example, "original": ORIGINAL_ID, "kernels": kernels,
                         "transitions": transitions})
    return {"format": FORMAT, "simulated": False, "source": source,
            "skipped_generations": skipped_total, "problems": problems}
