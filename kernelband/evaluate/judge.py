"""The judge: what runners are asked to run, and the verdict from the files they wrote.

Runs in the worker or CLI process and never imports problem modules, candidate code,
`kernelband.problem.runtime` or `kernelband.runner`. It decides from outputs it loaded itself
(`raw_outputs`): the comparison with the reference, determinism (two candidate runs bit for
bit), the original's own spread (the reference run twice), held-out privacy of messages, and
every figure in the verdict. A runner's report counts only when it rejects (a candidate can only
hurt itself that way), and its words are not shown for held-out cases.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kernelband.evaluate.compare import bitwise_equal, compare_results
from kernelband.evaluate.integrity import output_problem
from kernelband.evaluate.raw_outputs import Unreadable
from kernelband.evaluate.verdict import Verdict
from kernelband.problem import selfcheck
from kernelband.problem.model import Case, KernelProblem
from kernelband.sandbox.device import ORIGINAL_MOVED

_REASON = re.compile(r"[a-z][a-z0-9_]{0,47}")
MAX_RUNNER_MESSAGE = 1500


@dataclass(frozen=True)
class Entry:
    """One (case, seed) check: its label in messages, the case, its seed and the seed's index."""

    index: int
    where: str
    case: Case
    seed: int
    k: int
    held_out: bool

    def file(self, role: str) -> str:
        return f"{role}-{self.index:04d}.pt"


def plan(problem: KernelProblem, held_out: bool, seeds: int, base_seed: int) -> list[Entry]:
    """Every (case, seed) to check, public cases first; held-out names never appear in labels."""
    labelled = [(f"case {c.name}", c, False) for c in problem.cases]
    if held_out:
        labelled += [(f"held-out case #{i + 1}", c, True) for i, c in enumerate(problem.held_out_cases)]
    entries: list[Entry] = []
    for label, case, hidden in labelled:
        for k in range(seeds):
            entries.append(Entry(len(entries), f"{label}, seed {k}", case, base_seed + k, k, hidden))
    return entries


def runner_problem(problem: KernelProblem, entries: list[Entry]) -> dict[str, Any]:
    """The problem as a runner gets it: held-out cases only when it is to run them."""
    data = problem.to_dict()
    if not any(e.held_out for e in entries):
        data["held_out_cases"] = []
    return data


def checks_determinism(problem: KernelProblem, entry: Entry) -> bool:
    return entry.k == 0 and not problem.allow_nondeterminism


def steps(problem: KernelProblem, entries: list[Entry], roles: tuple[str, ...]) -> list[dict[str, Any]]:
    """A runner's steps: per entry the calls `roles` make and the file each result goes to.

    With both roles in one runner (the original checked against itself) the order alternates,
    so a result left behind by one cannot serve the other."""
    out = []
    for n, entry in enumerate(entries):
        files = {role: entry.file(role) for role in roles}
        if "candidate" in roles and checks_determinism(problem, entry):
            files["candidate_again"] = entry.file("candidate_again")
        out.append({"case": entry.case.name, "seed": entry.seed, "where": entry.where,
                    "files": files, "candidate_first": n % 2 == 0})
    return out


def again_steps(entries: list[Entry]) -> list[dict[str, Any]]:
    """The reference once more on each case's first seed (how far it moves by itself)."""
    return [{"case": e.case.name, "seed": e.seed, "where": e.where, "file": e.file("reference_again")}
            for e in entries if e.k == 0]


@dataclass(frozen=True)
class RunnerReport:
    """What a runner said, checked for shape: `rejected` with a reason, or not."""

    rejected: bool
    reason: str = ""
    message: str = ""
    step: int | None = None
    reported: dict[str, float] | None = None

    @classmethod
    def parse(cls, value: Any) -> RunnerReport:
        if not isinstance(value, dict):
            return cls(True, "runner_report_invalid", "the runner returned no report")
        reported = value.get("runner_reported")
        figures = {k: float(v) for k, v in reported.items() if isinstance(v, int | float)
                   and k in ("load_s", "run_s")} if isinstance(reported, dict) else {}
        if value.get("status") != "rejected":
            return cls(False, reported=figures)
        reason = str(value.get("reason", ""))
        reason = reason if _REASON.fullmatch(reason) and reason != "ok" else "runner_rejected"
        step = value.get("step")
        return cls(True, reason, str(value.get("message", ""))[:MAX_RUNNER_MESSAGE],
                   step if isinstance(step, int) and not isinstance(step, bool) else None, figures)


class Rejected(Exception):
    def __init__(self, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.reason, self.message, self.details = reason, message, details


def runner_rejection(report: RunnerReport, entries: list[Entry], who: str = "candidate") -> Rejected:
    """The runner's own rejection; its words are replaced where they could carry held-out data."""
    entry = next((e for e in entries if e.index == report.step), None)
    if entry is not None and entry.held_out:
        return Rejected(report.reason, f"{entry.where}: the {who} runner refused it ({report.reason}); "
                        "details of held-out cases are not shown, run the public cases to see them")
    return Rejected(report.reason, report.message or f"the {who} runner refused it ({report.reason})")


@dataclass
class Material:
    """What the judge loaded: reference outputs per entry, the reference's second run per case,
    the candidate's outputs per file name."""

    reference: dict[int, Any]
    reference_again: dict[str, Any]
    candidate: dict[str, Any]


def _loaded(value: Any, entry: Entry, who: str) -> Any:
    if not isinstance(value, Unreadable):
        return value
    if who == "reference":  # the problem's own reference: not the candidate's fault
        raise Rejected("reference_output_unreadable", f"{entry.where}: the reference's output could "
                       f"not be read as plain tensors ({value.detail}); the problem's reference must "
                       "return tensors, numbers or lists, tuples and dicts of them")
    reason = "output_not_plain_tensor" if value.reason == "not_plain" else "runner_output_missing"
    raise Rejected(reason, f"{entry.where}: the candidate's output could not be read as plain "
                   f"tensors ({value.detail}); return plain torch.Tensor values")


class Judge:
    """Decides one candidate's verdict from the loaded material (`decide`)."""

    def __init__(self, problem: KernelProblem, entries: list[Entry], material: Material,
                 known_spreads: dict[str, float] | None = None) -> None:
        self.problem, self.entries, self.material = problem, entries, material
        self.known = dict(known_spreads or {})  # case -> the reference's spread, measured earlier
        self.spreads: dict[str, float] = {}  # the spreads this verdict relied on
        self.worst_err = 0.0

    def spread(self, case: str) -> float:
        """How far the reference moved from itself (0: not measured, or not at all)."""
        if case not in self.spreads:
            value = self.known.get(case)
            if value is None:
                first = next((e for e in self.entries if e.case.name == case and e.k == 0), None)
                again = self.material.reference_again.get(case)
                value = 0.0 if first is None or again is None or isinstance(again, Unreadable) \
                    else selfcheck.spread(self.reference(first), again)
            self.spreads[case] = value
        return self.spreads[case]

    def reference(self, entry: Entry) -> Any:
        found = self.material.reference.get(entry.index, Unreadable("missing", "not written"))
        return _loaded(found, entry, "reference")

    def candidate(self, entry: Entry, role: str = "candidate") -> Any:
        found = self.material.candidate.get(entry.file(role), Unreadable("missing", "not written"))
        return _loaded(found, entry, "candidate")

    def check(self, entry: Entry) -> None:
        """One entry: plain outputs, comparison within the original's spread, determinism."""
        expected, actual = self.reference(entry), self.candidate(entry)
        if not_plain := output_problem(actual):
            raise Rejected("output_not_plain_tensor", f"{entry.where}: {not_plain}")
        found = compare_results(expected, actual, self.problem.tolerance)
        if found and not self._within_spread(entry, expected, actual, found.reason):
            raise self._mismatch(entry, found)
        if found is None:
            self.worst_err = max(self.worst_err, _max_abs_err(expected, actual))
        if checks_determinism(self.problem, entry):
            again = self.candidate(entry, "candidate_again")
            if not bitwise_equal(actual, again) and not self.spread(entry.case.name) > 0:
                raise Rejected("nondeterministic", f"{entry.where}: two runs on identical inputs differ "
                               "(set ALLOW_NONDETERMINISM = True if the kernel is meant to, e.g. atomics)")

    def _within_spread(self, entry: Entry, expected: Any, actual: Any, reason: str) -> bool:
        """A wrong_result within SPREAD_FACTOR x the original's own movement is not the
        candidate's fault: the problem is nondeterministic (the verdict says so)."""
        moved = self.spread(entry.case.name) if reason == "wrong_result" else 0.0
        if not 0.0 < moved < math.inf:
            return False
        wider, base = selfcheck.SPREAD_FACTOR * moved, self.problem.tolerance

        def tolerance(dtype: str) -> tuple[float, float]:
            atol, rtol = base(dtype)
            return max(atol, wider), rtol

        return compare_results(expected, actual, tolerance) is None

    def _mismatch(self, entry: Entry, found: Any) -> Rejected:
        detail = found.detail
        if entry.held_out:  # shapes of held-out cases must not reach a generator
            detail = f"max_abs_err {found.max_abs_err:.3g}" if found.max_abs_err is not None else "differs"
        moved_at_load = self.problem.self_spread.get(entry.case.name, 0.0) is None  # NaN/Inf moved
        if moved_at_load or math.isinf(self.spreads.get(entry.case.name, 0.0)):
            detail += f" ({ORIGINAL_MOVED}: its result depends on memory it never wrote or on a race)"
        return Rejected(found.reason, f"{entry.where}, {found.where}: {detail}", max_abs_err=found.max_abs_err)

    def decide(self, report: RunnerReport, seeds: int) -> Verdict:
        counts = {"seeds": seeds, "cases_checked": 0, "held_out_checked": 0}
        try:
            for entry in self.entries:
                if report.rejected and (report.step is None or entry.index >= report.step):
                    raise runner_rejection(report, self.entries)
                self.check(entry)
            if report.rejected:  # a rejection after the last check (the reference's re-run)
                raise runner_rejection(report, self.entries)
        except Rejected as rej:
            return Verdict.reject(rej.reason, rej.message, details=rej.details, **counts)
        return self.accepted(seeds)

    @classmethod
    def merged(cls, problem: KernelProblem, entries: list[Entry], parts: list[Judge]) -> Judge:
        """One judge over `entries` from parts that each passed some of them."""
        material = Material({}, {}, {})
        whole = cls(problem, entries, material)
        for part in parts:
            material.reference.update(part.material.reference)
            material.candidate.update(part.material.candidate)
            whole.spreads.update(part.spreads)
            whole.worst_err = max(whole.worst_err, part.worst_err)
        return whole

    def accepted(self, seeds: int) -> Verdict:
        """The verdict of a candidate that passed every entry."""
        cases = {e.case.name: e for e in self.entries}
        held = sum(1 for e in cases.values() if e.held_out)
        message = f"correct on {len(cases)} cases x {seeds} seeds ({len(self.entries)} checks)"
        moved = {n: v for n, v in self.spreads.items() if v > 0}
        if moved:
            labels = {n: ("a held-out case" if e.held_out else n) for n, e in cases.items()}
            message += ("; nondeterministic: the original disagreed with itself when run again ("
                        + ", ".join(f"{labels.get(n, n)} by {v:.3g}" for n, v in sorted(moved.items()))
                        + f"), compared within {selfcheck.SPREAD_FACTOR:g}x that")
        return Verdict(
            correct=True, reason="ok", message=message, cases_checked=len(cases), seeds=seeds,
            held_out_checked=held,
            flags=("nondeterminism_allowed",) if self.problem.allow_nondeterminism or moved else (),
            details={"checks": len(self.entries), "max_abs_err": self.worst_err})


def _max_abs_err(expected: Any, actual: Any) -> float:
    """The largest finite difference between two agreeing results (0 when there is none)."""
    found = selfcheck.spread(expected, actual)
    return found if math.isfinite(found) else 0.0
