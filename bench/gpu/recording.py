"""Record one problem's transition table: breadth-first, every rules-generator rewrite per parent.

Runs in a recorder child (it imports and runs the problem's code). Every parent taken from the
frontier is expanded exhaustively: for each of the six strategies, every distinct rewrite the
rules generator can produce (the generator picks one of these per seed), or one row with
`child: null, reason: no_applicable_transformation` when no rule applies. The table is written
after each parent, so a problem stopped by its time budget keeps only whole parents.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.gpu.record_timing import Outcome, Recorder
from kernelband.bandit import STRATEGY_NAMES

FORMAT = "kernelband-replay/1"
ORIGINAL_ID = "orig"
HARD_FACTOR = 1.4  # a parent still unfinished at budget x this is dropped, not kept half-done


@dataclass
class Table:
    """The kernels and rows recorded so far for one problem."""

    name: str
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    by_code: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # hash -> (id, reason)
    expanded: int = 0
    status: str = "in_progress"
    note: str = ""


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def kernel_entry(outcome: Outcome, depth: int, parent: str | None, description: str) -> dict[str, Any]:
    """A kernel row of the replay table (time, phi, h) with how it was made."""
    entry: dict[str, Any] = {"time_ms": outcome.time_ms, "phi": outcome.phi, "h": outcome.h,
                             "depth": depth}
    if parent is not None:
        entry["made_from"] = {"parent": parent, "rewrite": description}
    if outcome.calls_timed:
        entry["calls_timed"], entry["cv"] = outcome.calls_timed, round(outcome.cv, 4)
        entry["median_ms"] = outcome.median_ms
    return entry


def variants(code: str, strategy: str, inplace: bool, entry: str) -> list[tuple[str, str]]:
    """Every rewrite of `code` the rules generator offers for `strategy` (its own filter)."""
    from kernelband.generate.extract import check_region
    from kernelband.generate.rules.generator import candidate_variants

    try:
        found = candidate_variants(code, strategy, inplace)
    except Exception:  # noqa: BLE001 - a parent the rules cannot parse offers no rewrite
        return []
    return [v for v in found if check_region(v[1], entry).ok]


def child_row(table: Table, recorder: Recorder, parent: str, depth: int,
              description: str, code: str) -> tuple[dict[str, Any], str | None]:
    """Evaluate (or reuse) one rewrite; returns its row and the id of a new correct kernel."""
    from kernelband.evaluate.static_checks import check_source

    key = _digest(code)
    if key in table.by_code:
        known, reason = table.by_code[key]
        return {"child": known, "reason": reason, "rewrite": description, "reused": True}, None
    rejected = check_source(code)
    outcome = (Outcome(False, rejected.reason, rejected.message[:300]) if rejected is not None
               else recorder.evaluate(code))
    if not outcome.ok and "CUDA error" in outcome.message:
        raise ContextLost(f"{description}: {outcome.message[:120]}")
    kid = f"k{len(table.kernels)}" if outcome.ok else None
    table.by_code[key] = (kid, outcome.reason)
    row = {"child": kid, "reason": outcome.reason, "rewrite": description}
    if not outcome.ok:
        row["message"] = outcome.message
        return row, None
    assert kid is not None
    table.kernels[kid] = kernel_entry(outcome, depth + 1, parent, description)
    return row, kid


class OutOfTime(Exception):
    """A parent's expansion passed the problem's hard deadline; its rows are dropped."""


class ContextLost(OutOfTime):
    """A candidate broke the process' CUDA context (an illegal address is sticky): every later
    candidate in this process would fail too, so the parent is dropped and the problem ends."""


def expand(table: Table, recorder: Recorder, parent: str, code: str, depth: int,
           deadline: float) -> list[tuple[str, str]]:
    """All rows of one parent, added only when the parent is complete; returns the new correct
    children (id, code). Raises OutOfTime (and adds nothing) past `deadline` (monotonic)."""
    problem = recorder.problem
    rows: list[dict[str, Any]] = []
    new: list[tuple[str, str]] = []
    known = dict(table.by_code)
    try:
        for strategy in STRATEGY_NAMES:
            options = variants(code, strategy, bool(problem.inplace_outputs), problem.entry)
            if not options:
                rows.append({"parent": parent, "strategy": strategy, "child": None,
                             "reason": "no_applicable_transformation"})
            for description, child_code in options:
                if time.monotonic() > deadline:
                    raise OutOfTime(parent)
                row, kid = child_row(table, recorder, parent, depth, description, child_code)
                rows.append({"parent": parent, "strategy": strategy, **row})
                if kid is not None:
                    new.append((kid, child_code))
    except OutOfTime:
        for kid, _ in new:
            table.kernels.pop(kid, None)
        table.by_code = known
        raise
    table.rows += rows
    table.expanded += 1
    return new


def document(table: Table, label: str, started: float) -> dict[str, Any]:
    """The problem's replay document (format: bench/replay/README.md)."""
    problem = {"name": table.name, "original": ORIGINAL_ID, "kernels": table.kernels,
               "transitions": table.rows}
    return {"format": FORMAT, "simulated": False, "label": label, "status": table.status,
            "note": table.note, "parents_expanded": table.expanded,
            "wall_s": round(time.monotonic() - started, 1), "problems": [problem]}


def write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def record_problem(path: Path, out: Path, device: str, depth: int, budget_s: float,
                   seeds: int, gpu_lock: Any = None) -> dict[str, Any]:
    """Record `path` (a TritonBench-G file) into out/<name>.json; returns the summary line."""
    started = time.monotonic()
    label = "measured" if device.startswith("cuda") else "estimated"
    table = Table(path.stem)
    target = out / f"{path.stem}.json"
    with tempfile.TemporaryDirectory(prefix="kb-record-") as work:
        try:
            recorder = _start(path, Path(work), device, seeds, gpu_lock)
            root = recorder.evaluate(None)
        except Exception as exc:  # noqa: BLE001 - a problem the service does not accept
            table.status, table.note = "not_accepted", f"{type(exc).__name__}: {exc}"[:400]
            return _finish(table, target, label, started)
        if not root.ok:
            table.status, table.note = "original_failed", f"{root.reason}: {root.message}"
            return _finish(table, target, label, started)
        table.kernels[ORIGINAL_ID] = kernel_entry(root, 0, None, "")
        table.by_code[_digest(recorder.problem.editable)] = (ORIGINAL_ID, "ok")
        write_atomic(target, document(table, label, started))
        queue = [(ORIGINAL_ID, recorder.problem.editable, 0)]
        deadline = started + budget_s * HARD_FACTOR
        while queue and queue[0][2] < depth:
            if time.monotonic() - started > budget_s:
                table.note = f"time budget {budget_s:.0f} s reached; {len(queue)} parents not expanded"
                break
            parent, code, level = queue.pop(0)
            try:
                children = expand(table, recorder, parent, code, level, deadline)
            except ContextLost as lost:
                table.note = (f"CUDA context lost while expanding {parent} ({lost}); that parent "
                              f"dropped, {len(queue) + 1} parents not expanded")
                break
            except OutOfTime:
                table.note = (f"parent {parent} not finished by {budget_s * HARD_FACTOR:.0f} s "
                              f"(dropped); {len(queue) + 1} parents not expanded")
                break
            queue += [(kid, c, level + 1) for kid, c in children]
            write_atomic(target, document(table, label, started))
        table.status = "complete" if not table.note else "budget"
    return _finish(table, target, label, started)


def _start(path: Path, work: Path, device: str, seeds: int, gpu_lock: Any) -> Recorder:
    from kernelband.problem.loader import load_problem

    problem = load_problem(path.read_text(), "tritonbench", path.stem, workdir=work, device=device)
    return Recorder(problem, device, work, seeds, gpu_lock)


def _finish(table: Table, target: Path, label: str, started: float) -> dict[str, Any]:
    doc = document(table, label, started)
    write_atomic(target, doc)
    return {"name": table.name, "status": table.status, "note": table.note,
            "kernels": len(table.kernels), "transitions": len(table.rows), "wall_s": doc["wall_s"]}
