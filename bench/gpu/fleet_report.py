"""The fleet run's outputs: results.json, summary.md and the logs, plus the machine facts."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.common import markdown_table

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
    info["device"] = _run(["nvidia-smi", "--query-gpu=name,driver_version",
                           "--format=csv,noheader"]) or f"a CPU machine without GPU ({platform.machine()})"
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu"
                                  if Path("/usr/local/cuda/bin/ncu").exists() else None)
    info["ncu"] = (_run([ncu, "--version"]).splitlines() or ["?"])[-1] if ncu else "not found"
    return info


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_markdown(r: dict[str, Any]) -> str:
    """The human summary of one run (every number is read from `r`)."""
    env, m = r.get("environment", {}), r.get("metrics", {})
    gpus = r.get("gpus", 1)
    lines = [f"# Fleet run, one node: target {r.get('target')}, {gpus} measuring worker(s)",
             "",
             f"Device: {env.get('device')}; torch {env.get('torch')}, triton {env.get('triton')}, "
             f"ncu {env.get('ncu')}; {env.get('cpus')} CPUs, Python {env.get('python')}.",
             f"Suite {r.get('suite_id')}: {len(r.get('problems', []))} problems "
             f"({', '.join(r.get('problems', []))}), budget {r.get('budget')}, "
             f"{r.get('parallel')} pulls in flight per track, rules generator; measuring queue "
             f"`{r.get('measure_queue')}` with {gpus} `-c 1` worker(s).", ""]
    plan = r.get("worker_plan") or {}
    if plan:
        lines += ["Workers: " + "; ".join(f"{name} `{how}`" for name, how in plan.items()) + ".",
                  ""]
    if r.get("error"):
        lines += [f"**The run stopped early:** {r['error']}", ""]
    if r.get("deadline_hit"):
        lines += ["**Time limit reached before every job finished** (see integrity below).", ""]
    lines += _metrics_section(m) + _stages_section(r.get("stages", []))
    lines += _integrity_section(r.get("integrity", {}), r.get("kill", {}))
    lines += ["## Timeline", "", markdown_table(("t (s)", "event"), [
        (e["t_s"], e["what"]) for e in r.get("timeline", [])]), ""]
    return "\n".join(lines)


def _metrics_section(m: dict[str, Any]) -> list[str]:
    suite, active = m.get("busy_share_suite", {}), m.get("busy_share_active", {})
    rows = [("suite wall (submit to last result)", f"{_num(m.get('wall_s'), 1)} s"),
            ("pulls finished", m.get("pulls", "-")),
            ("pulls/s", _num(m.get("pulls_per_s"), 3)),
            ("busy share, held (suite wall)", _pct(suite.get("held"))),
            ("busy share, worker wall (suite wall)", _pct(suite.get("worker"))),
            ("measuring share, timed parts (suite wall)", _pct(suite.get("measuring"))),
            (f"busy share, held (active window {_num(active.get('window_s'), 1)} s)",
             _pct(active.get("held"))),
            ("worker time lost to the kill (s)", _num(m.get("killed_try_s")))]
    return ["## Throughput and busy share", "",
            "held = union of started->finished of the measuring queue's profile/verify attempts "
            "(scheduler records); worker wall = the workers' own seconds per attempt; timed "
            "parts = check + measure + signature as the workers reported them (the first three "
            "rows are the whole queue's: with N workers they can exceed 100%). Active window = "
            "first dispatch to last result on the measuring queue.", "",
            markdown_table(("metric", "value"), rows), ""] + _per_worker_section(m)


def _per_worker_section(m: dict[str, Any]) -> list[str]:
    suite, active = m.get("busy_by_worker_suite") or {}, m.get("busy_by_worker_active") or {}
    if not suite:
        return []
    names = sorted(suite.get("per_worker", {}))
    rows = [(name, _num(suite.get("held_s", {}).get(name), 1),
             _pct(suite["per_worker"].get(name)), _pct(active.get("per_worker", {}).get(name)))
            for name in names]
    rows.append((f"all {suite.get('workers')} (sum / (N x window))",
                 _num(sum(suite.get("held_s", {}).values()), 1), _pct(suite.get("overall")),
                 _pct(active.get("overall"))))
    return ["Per measuring worker (held attempts, the attempt's last try):", "",
            markdown_table(("worker", "held s", "busy (suite wall)",
                            f"busy (active window {_num(active.get('window_s'), 1)} s)"), rows),
            ""]


def _stages_section(stages: list[dict[str, Any]]) -> list[str]:
    rows = [(s["kind"], s["finished"], s["failed"], _num(s["work_total_s"]),
             _num(s["work_mean_s"]), _num(s["work_median_s"]), _num(s["wait_median_s"]),
             ", ".join(f"{k} {v:.2f}" for k, v in s["parts_median_s"].items()) or "-")
            for s in stages]
    return ["## Time per step (GET /v1/jobs/{id}/stages, summed over the suite's jobs)", "",
            markdown_table(("step", "finished", "failed", "worker s total", "mean s",
                            "median of job medians s", "queue wait median s",
                            "parts (median s)"), rows), ""]


def _integrity_section(i: dict[str, Any], kill: dict[str, Any]) -> list[str]:
    c = i.get("counts", {})
    checks = [(k, "none" if not v else json.dumps(v)[:300]) for k, v in i.items()
              if k not in ("ok", "counts")]
    outcome = kill.get("outcome", {})
    kill_line = ("no kill: " + kill.get("skipped", "")) if "attempt" not in kill else (
        f"kill -9 of the measuring worker {kill.get('worker', '')} at attempt "
        f"{kill['attempt']} ({kill.get('kind')}, "
        f"{kill.get('held_s')} s into it, try {kill.get('tries_at_kill')}); afterwards: state "
        f"{outcome.get('state')}, tries {outcome.get('tries')}, re-sent {outcome.get('resent')}; "
        f"processes of the worker left alive by the kill (sandbox children run in their own "
        f"session): {kill.get('survivors') or 'none'} 1 s after, "
        f"{kill.get('survivors_after_10s', 'not checked')} 10 s after")
    return ["## Nothing lost, nothing doubled", "",
            f"**{'OK' if i.get('ok') else 'PROBLEMS FOUND'}**: {c.get('attempts')} attempts, "
            f"{c.get('results_recorded')} with a result, {c.get('pulls_finished')} pulls finished, "
            f"{c.get('candidates')} candidates, {c.get('measurements')} measurements; retried "
            f"attempts {c.get('retried_attempts')}; jobs {c.get('jobs_by_status')}.", "",
            f"Attempts by kind and state: `{json.dumps(c.get('attempts_by_kind'))}`", "",
            kill_line, "", markdown_table(("check", "found"), checks), ""]


def write_outputs(results: dict[str, Any], out: Path, log_dir: Path) -> None:
    """results.json, summary.md and the tail of every log under out/logs."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    try:
        (out / "summary.md").write_text(summary_markdown(results))
    except Exception as exc:  # noqa: BLE001 - the JSON is already written
        (out / "summary.md").write_text(f"# Fleet run\n\nsummary failed: {exc}\n")
    if log_dir.is_dir():
        (out / "logs").mkdir(exist_ok=True)
        for log in sorted(log_dir.glob("*.log")):
            data = log.read_bytes()
            (out / "logs" / log.name).write_bytes(data[-LOG_TAIL_BYTES:])
