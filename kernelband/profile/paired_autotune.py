"""Judge side of autotuned kernels in paired timing (kernelband/runner/autotune.py says why).

Before the candidate's runner first calls its kernels, the judge asks the original's runner
which config each autotuned kernel picked and hands those picks to the candidate's runner, which
takes them only for kernels whose source and configs equal the original's. After the rounds it
asks both again: picks that still differ are named in the run's notes (the runners' own word,
kept as a diagnostic: it changes no figure).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.profile.paired_runners import OriginalRunnerError

Ask = Callable[[str, dict[str, Any]], tuple[dict[str, Any], float]]


def _picks(ask: Ask, role: str) -> dict[str, Any] | None:
    try:
        reply, _ = ask(role, {"cmd": "autotune_picks"})
    except (OriginalRunnerError, TimingRejected):
        return None
    found = reply.get("picks")
    return found if isinstance(found, dict) else None


def share_picks(ask: Ask) -> list[str]:
    """The original's picks to the candidate's runner; a note naming the kernels pinned."""
    picks = _picks(ask, "original")
    if not picks:
        return []
    try:
        reply, _ = ask("candidate", {"cmd": "pin_autotune", "pins": picks})
    except TimingRejected as exc:  # a runner that will not take them autotunes on its own
        return [f"autotune picks not taken by the candidate's runner: {str(exc)[:200]}"]
    pinned = [str(name) for name in reply.get("pinned") or [] if name in picks]
    if not pinned:
        return []
    return ["unchanged autotuned kernels ran the original's configs: "
            + "; ".join(f"{name} {', '.join(picks[name].get('configs', []))}" for name in sorted(pinned))]


def differing_picks(ask: Ask) -> list[str]:
    """A note for each autotuned kernel whose configs differ between the two runners."""
    original, candidate = _picks(ask, "original") or {}, _picks(ask, "candidate") or {}
    notes = []
    for name in sorted(set(original) & set(candidate)):
        if original[name].get("fingerprint") == candidate[name].get("fingerprint") and \
                original[name].get("picks") != candidate[name].get("picks"):
            notes.append(f"autotune picks of unchanged {name} differ (as the runners report them): original "
                         f"{original[name].get('configs')}, candidate {candidate[name].get('configs')}")
    return notes
