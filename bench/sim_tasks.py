"""SIMULATED worker tasks: answers that stand in for generation, compile, profile and verify, so
a benchmark times the scheduler's own work (bench/scheduler_throughput.py, the fleet workers)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

SIMULATED = "SIMULATED task results: workers answer instantly; no LLM, compiler or GPU ran"


def _unit(text: str) -> float:
    """A deterministic number in [0, 1) from a text (stands in for a measured quantity)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 16**8


def sim_generate(payload: dict[str, Any]) -> dict[str, Any]:
    """SIMULATED generation: the parent plus a marker line; no LLM is called."""
    seed = payload.get("seed")  # a code line: a comment alone would be a duplicate (dedupe)
    editable = f"{payload['parent_editable']}\nstep_{seed} = 0  # {payload.get('strategy')} {seed}"
    return {"ok": True, "editable": editable[-2000:], "reason": "", "prompt_tokens": 0,
            "completion_tokens": 0, "cost_usd": 0.0, "cost_known": True, "model": "simulated"}


def sim_compile(payload: dict[str, Any]) -> dict[str, Any]:
    """SIMULATED compile: always succeeds with a small static profile."""
    return {"ok": True, "static_profile": {"registers": 32, "simulated": True}}


def sim_profile(payload: dict[str, Any]) -> dict[str, Any]:
    """SIMULATED measurement, labelled `estimated` with method `simulated`."""
    u = _unit(payload["editable"])
    time_ms = 0.5 + u
    measurement = {"label": "estimated", "method": "simulated", "device": "none",
                   "target": payload["target"], "time_ms": time_ms, "case_times_ms": [time_ms],
                   "cv": 0.0, "noisy": False, "paired_ratio": None}
    features = {"phi": [float(np.log1p(time_ms)), 32 + 64 * u, 48 * u, 7.0, 100 * (1 - u)],
                "h": [100 * u, 100 * (1 - u), 50.0], "h_sources": ["estimate"] * 3}
    return {"ok": True, "measurement": measurement, "features": features}


def sim_verify(payload: dict[str, Any]) -> dict[str, Any]:
    """SIMULATED held-out check: passes."""
    return {"ok": True, "verdict": {"correct": True, "held_out_checked": 1}}


SIM_TASKS = {"generate": sim_generate, "compile": sim_compile, "profile": sim_profile,
             "verify": sim_verify}
