"""Write a fleet run's records: one run's results.json, and the scaling table of runs at several
GPU counts (scaling.md), from the runs' results as plain dicts.

Efficiency is T1 / (N x TN) with T the suite wall (submit to last result), only between
finished runs of the same suite (target, problems, budget, parallel) and only when the N = 1
run is among them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.common import fmt, markdown_table

LOG_TAIL_BYTES = 200_000


def environment(target: str) -> dict[str, Any]:
    """Device (nvidia-smi), package versions and ncu, read without importing torch."""
    info: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                            "kernel": platform.release(), "target": target}
    for name in ("torch", "triton", "celery", "sqlalchemy"):
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = "missing"
    info["device"] = (_stdout(["nvidia-smi", "--query-gpu=name,driver_version",
                               "--format=csv,noheader"])
                      or f"a CPU machine without GPU ({platform.machine()})")
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    info["ncu"] = (_stdout([ncu, "--version"]).splitlines() or ["not found"])[-1]
    return info


def _stdout(argv: list[str]) -> str:
    """What `argv` printed; empty when it cannot run."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def write_outputs(results: dict[str, Any], out: Path, log_dir: Path) -> None:
    """results.json and the tail of every log under out/logs (scaling.md is the run's table)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    if log_dir.is_dir():
        (out / "logs").mkdir(exist_ok=True)
        for log in sorted(log_dir.glob("*.log")):
            data = log.read_bytes()
            (out / "logs" / log.name).write_bytes(data[-LOG_TAIL_BYTES:])


def short_worker(name: str) -> str:
    """`gpu0` of `gpu0@%h` or `gpu0@host`: a worker's name without its host."""
    return name.split("@", 1)[0]


def device_line(text: str | None) -> str | None:
    """nvidia-smi's one line per GPU as one line: `NVIDIA H200, 580.159.04 (x4)`."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if len(set(lines)) == 1 and len(lines) > 1:
        return f"{lines[0]} (x{len(lines)})"
    return "; ".join(lines) or text


def run_row(results: dict[str, Any], source: str) -> dict[str, Any]:
    """One run's line of the table, read from its results.json."""
    m = results.get("metrics") or {}
    suite_busy = m.get("busy_by_worker_suite") or {}
    active_busy = m.get("busy_by_worker_active") or {}
    integrity = results.get("integrity") or {}
    env = results.get("environment") or {}
    profile: dict[str, Any] = next(
        (s for s in results.get("stages") or [] if s.get("kind") == "profile"), {})
    complete = bool(m) and not results.get("deadline_hit") and not results.get("error")
    return {
        "gpus": int(results.get("gpus") or 1), "source": source,
        "target": results.get("target"), "device": device_line(env.get("device")),
        "problems": list(results.get("problems") or []), "budget": results.get("budget"),
        "parallel": results.get("parallel"),
        "wall_s": m.get("wall_s"), "active_s": active_busy.get("window_s"),
        "pulls": m.get("pulls"), "pulls_per_s": m.get("pulls_per_s"),
        "busy_overall": suite_busy.get("overall"),
        "busy_overall_active": active_busy.get("overall"),
        "busy_per_worker": {short_worker(n): v for n, v in
                            (suite_busy.get("per_worker") or {}).items()},
        # candidates judged: profile attempts a measuring worker finished, accepted or refused
        "judged": int(profile.get("finished") or 0) + int(profile.get("failed") or 0) if profile else None,
        "profile_mean_s": profile.get("work_mean_s"),
        "profile_parts_s": profile.get("parts_median_s"),
        "integrity_ok": integrity.get("ok"), "complete": complete,
        "deadline_hit": bool(results.get("deadline_hit")), "error": results.get("error"),
        "started_at": results.get("started_at"), "finished_at": results.get("finished_at"),
    }


def skipped_row(gpus: int, reason: str) -> dict[str, Any]:
    """A GPU count that did not run (not enough time left, say)."""
    return {"gpus": gpus, "source": None, "complete": False, "skipped": reason}


def suite_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What must match for two runs to be the same suite."""
    return (row.get("target"), tuple(row.get("problems") or ()), row.get("budget"),
            row.get("parallel"))


def merge_runs(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per GPU count, by N: a ran row over a skipped one, a finished run over a stopped
    one, else the one that finished last; notes say what was dropped."""
    rows = list(rows)
    chosen = {int(r["gpus"]): r for r in sorted(rows, key=_rank)}
    notes = [f"N={r['gpus']}: kept {chosen[int(r['gpus'])].get('source')}, dropped "
             f"{r.get('source')}" for r in rows if r is not chosen[int(r["gpus"])]]
    return [chosen[n] for n in sorted(chosen)], notes


def _rank(row: dict[str, Any]) -> tuple[bool, bool, float]:
    return ("skipped" not in row, bool(row.get("complete")), float(row.get("finished_at") or 0))


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def scaling_table(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Merged rows with speedup T1/TN and efficiency T1/(N x TN) (suite wall and active
    window) against the N = 1 run; None where there is no finished N = 1 run of the same suite."""
    merged, notes = merge_runs(rows)
    base = next((r for r in merged if r["gpus"] == 1 and r.get("complete")), None)
    if base is None:
        notes.append("no finished N=1 run: efficiency T1/(N x TN) not computed")
    table = []
    for row in merged:
        out = {**row, "speedup": None, "efficiency": None, "efficiency_active": None}
        if base is not None and row.get("complete") and suite_key(row) == suite_key(base):
            n = row["gpus"]
            out["speedup"] = _ratio(base["wall_s"], row["wall_s"])
            out["efficiency"] = _ratio(base["wall_s"], n * row["wall_s"] if row["wall_s"] else None)
            out["efficiency_active"] = _ratio(
                base.get("active_s"), n * row["active_s"] if row.get("active_s") else None)
        elif base is not None and "skipped" not in row and suite_key(row) != suite_key(base):
            notes.append(f"N={row['gpus']} ({row.get('source')}) ran another suite than N=1: "
                         "no efficiency")
        table.append(out)
    return table, notes


def per_gpu_hour(row: dict[str, Any]) -> float | None:
    """Candidates judged per GPU-hour of the active window (the suite's own figure, over N GPUs)."""
    window = row.get("active_s") or row.get("wall_s")
    judged = row.get("judged")
    return judged * 3600.0 / (row["gpus"] * window) if judged is not None and window else None


def _state(row: dict[str, Any]) -> str:
    if "skipped" in row:
        return f"skipped: {row['skipped']}"
    if row.get("error"):
        return f"stopped: {str(row['error'])[:80]}"
    if row.get("deadline_hit"):
        return "time limit hit: not every job finished"
    return "finished"


def _integrity(row: dict[str, Any]) -> str:
    ok = row.get("integrity_ok")
    return "-" if ok is None else ("OK" if ok else "PROBLEMS")


def _workers(row: dict[str, Any]) -> str:
    return ", ".join(f"{n} {_pct(v)}" for n, v in sorted((row.get("busy_per_worker") or {})
                                                           .items())) or "-"


COLUMNS = ("N", "candidates per GPU-hour", "wall s", "pulls", "pulls/s", "speedup T1/TN", "efficiency T1/(N x TN)",
           "efficiency, active window", "busy overall", "busy per worker", "integrity",
           "state")


def table_cells(row: dict[str, Any]) -> tuple[Any, ...]:
    """One markdown/plain row in COLUMNS order."""
    return (row["gpus"], fmt(per_gpu_hour(row), 1), fmt(row.get("wall_s"), 1), row.get("pulls", "-") or "-",
            fmt(row.get("pulls_per_s"), 3), fmt(row.get("speedup"), 2),
            _pct(row.get("efficiency")), _pct(row.get("efficiency_active")),
            _pct(row.get("busy_overall")), _workers(row), _integrity(row), _state(row))


CPU_LABEL = ("CPU rehearsal: the measuring workers take the `cpu` queue (interpreter check and "
             "cost-model estimates, labelled `estimated`); times show that the harness works, "
             "not what GPUs do.")


def scaling_markdown(table: Sequence[dict[str, Any]], notes: Sequence[str],
                     label: str | None = None) -> str:
    """scaling.md: context, the table, how each column is computed, the notes."""
    ran = [r for r in table if "skipped" not in r]
    first = ran[0] if ran else {}
    lines = ["# Fleet scaling: the same suite at several GPU counts", ""]
    if first.get("target") == "cpu":
        lines += [f"**{CPU_LABEL}**", ""]
    if label:
        lines += [f"**{label}**", ""]
    if first:
        lines += [f"Target `{first.get('target')}`, device {first.get('device')}; suite: "
                  f"{len(first.get('problems') or [])} problems "
                  f"({', '.join(first.get('problems') or [])}), budget {first.get('budget')}, "
                  f"{first.get('parallel')} pulls in flight per track, rules generator; one "
                  "measuring worker per GPU (its `-c`: the run's timeline).", ""]
    lines += [markdown_table(COLUMNS, [table_cells(r) for r in table]), "",
              "candidates per GPU-hour = profile attempts finished (accepted or refused) x "
              "3600 / (N x active window); wall = suite submission to the last result; efficiency = T1 / (N x TN) against "
              "the N=1 run of the same suite (finished runs only); active window = first "
              "dispatch to last result on the measuring queue; busy = union of each measuring "
              "worker's held attempts (started -> finished) over the suite wall, overall = "
              "their sum / (N x wall); integrity = nothing lost or doubled "
              "(bench/gpu/fleet_records.integrity).", ""]
    if any(r.get("profile_mean_s") is not None for r in ran):
        lines += ["Profile step, mean s (median of its parts): " + "; ".join(
            f"N={r['gpus']} {fmt(r.get('profile_mean_s'), 2)} ("
            + ", ".join(f"{k} {v:.2f}" for k, v in (r.get("profile_parts_s") or {}).items())
            + ")" for r in ran) + ". A part that grows with N is shared between the GPUs' "
            "workers (a lock, the CPUs).", ""]
    lines += [f"Runs: {', '.join(str(r.get('source')) for r in ran) or 'none'}.", ""]
    if notes:
        lines += ["Notes:", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(lines)
