"""Replay landscapes: recorded (parent, strategy) -> child tables (format in bench/replay/README.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelband.bandit import STRATEGY_NAMES
from kernelband.policy_bench.landscapes import SimKernel

FORMAT = "kernelband-replay/1"


class ReplayFormatError(ValueError):
    """A replay table does not follow bench/replay/README.md."""


@dataclass
class ReplayProblem:
    """One recorded problem: its kernels and the transitions between them."""

    name: str
    original: str
    kernels: dict[str, dict[str, Any]]
    transitions: dict[tuple[str, str], list[str | None]] = field(default_factory=dict)


def load_replay(path: Path) -> tuple[list[ReplayProblem], bool]:
    """Read and validate a replay table, or a folder of per-problem tables (a recording, see
    bench/replay/README.md); returns the problems and whether they are simulated."""
    if path.is_dir():
        docs = [(p, json.loads(p.read_text())) for p in sorted(path.glob("*.json"))
                if p.name != "provenance.json" and not p.name.endswith(".summary.json")]
        problems = [q for p, d in docs for q in parse_replay(d, p, allow_empty=True)]
        if not problems:
            raise ReplayFormatError(f"{path}: no recorded problem with kernels in its *.json files")
        return problems, any(bool(d.get("simulated", False)) for _, d in docs)
    data = json.loads(path.read_text())
    return parse_replay(data, path), bool(data.get("simulated", False))


def parse_replay(data: dict[str, Any], path: Path, allow_empty: bool = False) -> list[ReplayProblem]:
    """The problems of one replay document; a problem without transitions is skipped."""
    if data.get("format") != FORMAT:
        raise ReplayFormatError(f"{path}: 'format' must be {FORMAT!r}, got {data.get('format')!r}")
    problems = []
    for raw in data.get("problems", []):
        kernels = raw["kernels"]
        if allow_empty and not raw["transitions"]:
            continue  # not accepted, or stopped before its first parent was expanded
        problem = ReplayProblem(raw["name"], raw["original"], kernels)
        if problem.original not in kernels:
            raise ReplayFormatError(f"{path}: original {problem.original!r} is not in 'kernels'")
        for row in raw["transitions"]:
            if row["strategy"] not in STRATEGY_NAMES or row["parent"] not in kernels:
                raise ReplayFormatError(f"{path}: bad transition {row}; see bench/replay/README.md")
            if row["child"] is not None and row["child"] not in kernels:
                raise ReplayFormatError(f"{path}: child {row['child']!r} is not in 'kernels'")
            problem.transitions.setdefault((row["parent"], row["strategy"]), []).append(row["child"])
        problems.append(problem)
    if not problems and not allow_empty:
        raise ReplayFormatError(f"{path}: no problems recorded")
    return problems


@dataclass
class ReplayLandscape:
    """Seed i replays problem i mod n; an unrecorded (parent, strategy) counts as a failure."""

    problems: list[ReplayProblem]
    name: str = "replay"
    simulated: bool = True
    uncovered: int = 0  # pulls that asked for a transition the table does not have

    def original(self, seed: int) -> SimKernel:
        problem = self.problems[seed % len(self.problems)]
        return self._kernel(problem, problem.original, problem.original)

    def child(
        self, parent: SimKernel, strategy: str | None, kernel_id: str, rng: np.random.Generator
    ) -> SimKernel | None:
        problem_name, table_id = parent.kernel_id.split("/", 1)[0], _table_id(parent.kernel_id)
        problem = next(p for p in self.problems if p.name == problem_name)
        names = STRATEGY_NAMES if strategy is None else (strategy,)
        rows = [c for s in names for c in problem.transitions.get((table_id, s), [])]
        if not rows:
            self.uncovered += 1
            return None
        child = rows[int(rng.integers(len(rows)))]
        return None if child is None else self._kernel(problem, child, kernel_id)

    def _kernel(self, problem: ReplayProblem, table_id: str, kernel_id: str) -> SimKernel:
        k = problem.kernels[table_id]
        h = k.get("h") or (50.0, 50.0, 50.0)
        unique = f"{problem.name}/{table_id}#{kernel_id}"  # a table kernel may be reached twice
        return SimKernel(unique, k["time_ms"], k["time_ms"], (0.0, 0.0, 0.0),
                         tuple(k.get("phi") or ()), (h[0], h[1], h[2]), 0.0)


def _table_id(kernel_id: str) -> str:
    return kernel_id.split("/", 1)[1].split("#", 1)[0]
