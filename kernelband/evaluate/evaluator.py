"""`evaluate_candidate`: static checks, then runners in sandbox children, then the judge.

The candidate's runner and the original's runner are separate children: reference outputs never
come from a process that loaded the candidate. The original checked against itself (editable
None) runs in one child that loads only the problem module. This process loads the files those
children wrote (`raw_outputs`) and decides (`judge`); it never imports their code.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kernelband.evaluate import judge
from kernelband.evaluate.judge import Entry, Material, RunnerReport
from kernelband.evaluate.raw_outputs import Unreadable, collector
from kernelband.evaluate.references import STORE, problem_key
from kernelband.evaluate.static_checks import check_source
from kernelband.evaluate.verdict import Verdict
from kernelband.problem import selfcheck
from kernelband.problem.model import KernelProblem
from kernelband.sandbox import SandboxLimits, SandboxResult, run_sandboxed
from kernelband.sandbox.device import detect_device, interpreter_irreproducible, interpreter_refusal
from kernelband.sandbox.gpu_lock import gpu_turn

TARGET = "kernelband.runner.correctness:run_correctness"
ChildRun = Callable[[dict[str, Any], list[str]], SandboxResult]  # (payload, file names) -> result
T = TypeVar("T")
U = TypeVar("U")


@dataclass
class _Check:
    """One evaluation's settings and what its runners cost (summed over children)."""

    problem: KernelProblem
    editable: str | None
    device: str
    limits: SandboxLimits
    key: str
    base_seed: int
    entries: list[Entry]
    wall_s: float = 0.0
    warm: bool = True
    isolated: bool | None = True
    reported: dict[str, float] = field(default_factory=dict)
    reference_source: str = "kept"
    # runs the public cases somewhere other than a child of their own: the live timing runner that
    # loaded the code checked (kernelband/profile/runner_check.py), given the payload and file names
    in_runner: ChildRun | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def seeds(self) -> int:
        return len({e.k for e in self.entries})

    def account(self, result: SandboxResult, report: RunnerReport | None = None) -> None:
        with self.lock:  # children may run side by side (`_together`)
            self._account(result, report)

    def _account(self, result: SandboxResult, report: RunnerReport | None) -> None:
        self.wall_s += result.wall_s
        self.warm = self.warm and result.warm
        if result.network_isolated is False:
            self.isolated = False
        for name, value in ((report.reported or {}) if report else {}).items():
            self.reported[name] = self.reported.get(name, 0.0) + value


def _run(check: _Check, editable: str | None, payload: dict[str, Any],
         entries: list[Entry], in_runner: ChildRun | None = None) -> tuple[SandboxResult, RunnerReport]:
    """One runner child (or `in_runner`: the candidate's live runner), given only the cases of
    `entries` (its steps, then its re-runs, in order); its named files are loaded into
    `result.collected`, and the step its report names is mapped back to the plan's index."""
    names = [name for step in payload["steps"] for name in step["files"].values()]
    names += [step["file"] for step in payload.get("again", [])]
    payload = {"problem": judge.runner_problem(check.problem, entries), "editable": editable,
               "device": check.device, **payload}
    if in_runner is not None:
        result = in_runner(payload, names)
    else:
        # never during another candidate's timed rounds; a check run in the candidate's runner is
        # made inside the shared turn that starts it, which covers its reference runs too
        with nullcontext() if check.in_runner is not None else gpu_turn(check.device, exclusive=False):
            result = run_sandboxed(TARGET, payload, check.limits, collect=collector(names))
    report = RunnerReport.parse(result.value) if result.ok else RunnerReport(True, result.reason)
    check.account(result, report if result.ok else None)
    if report.step is not None:  # a step it was not given names no check
        report = replace(report, step=entries[report.step].index if 0 <= report.step < len(entries) else None)
    return result, report


def _sandbox_failure(check: _Check, result: SandboxResult, who: str = "") -> Verdict:
    """A child that timed out, crashed or ended without a report."""
    message = result.message.strip().splitlines()[0] if result.message.strip() else result.reason
    reason, message = result.reason, f"{who}{message} (sandbox, after {result.wall_s:.1f} s)"
    if check.editable is None and check.limits.interpret:  # the original: the interpreter's failure
        reason, message = interpreter_refusal(reason, message) or (reason, message)
    return Verdict.reject(reason, message, seeds=check.seeds, details={
        "sandbox_wall_s": check.wall_s, "stderr_tail": result.stderr_tail[-1500:], "warm": result.warm})


def _keep_references(check: _Check, collected: dict[str, Any], entries: list[Entry]) -> dict[int, Any]:
    """The reference outputs a runner of the original wrote, kept for later candidates, and
    each case's spread where the reference ran twice."""
    fresh = {e.index: collected.get(e.file("reference"), Unreadable("missing", "not written")) for e in entries}
    for e in entries:
        if not isinstance(fresh[e.index], Unreadable):
            STORE.keep(check.key, e.case.name, e.seed, fresh[e.index])
        again = collected.get(e.file("reference_again"), Unreadable("missing", "not run"))
        if e.k == 0 and not isinstance(again, Unreadable) and not isinstance(fresh[e.index], Unreadable):
            STORE.keep_spread(check.key, e.case.name, selfcheck.spread(fresh[e.index], again))
    return fresh


def _original_spreads(check: _Check, collected: dict[str, Any], reference: dict[int, Any]) -> dict[str, float]:
    """Per case, the largest difference between any run of this check and the reference: the
    original checked against itself is the original's code on every side, so its re-run, the
    candidate's run and the candidate's determinism re-run each measure its own nondeterminism
    (a race or a read of memory it never wrote can move in any one of them). Kept for later
    candidates of the problem, so a case whose runs all agreed bit for bit needs no runner of
    the original just to measure it."""
    spreads: dict[str, float] = {}
    for e in check.entries:
        runs = [reference.get(e.index), *(collected.get(e.file(role)) for role in
                                          ("candidate", "candidate_again", "reference_again"))]
        readable = [r for r in runs if r is not None and not isinstance(r, Unreadable)]
        if len(readable) < 2:
            continue
        moved = max(selfcheck.spread(readable[0], other) for other in readable[1:])
        spreads[e.case.name] = max(spreads.get(e.case.name, 0.0), moved)
    for case, value in spreads.items():
        STORE.keep_spread(check.key, case, value)
    return spreads


def _check_original(check: _Check, count_launches: bool) -> Verdict:
    """The original against itself in one child that loads only the problem module (or in
    `check.in_runner`: a timing runner that loaded only the problem module)."""
    result, report = _run(check, None, {
        "count_launches": count_launches, "again_only_when_moved": True,
        "steps": judge.steps(check.problem, check.entries, ("reference", "candidate")),
        "again": judge.again_steps(check.entries)}, check.entries + [e for e in check.entries if e.k == 0],
        check.in_runner)
    if not result.ok:
        return _sandbox_failure(check, result)
    collected = result.collected or {}
    spreads: dict[str, float] = {}
    if not report.rejected:
        reference = _keep_references(check, collected, check.entries)
        spreads = _original_spreads(check, collected, reference)
    else:
        reference = {e.index: collected.get(e.file("reference"), Unreadable("missing", "not written"))
                     for e in check.entries}
    again = {e.case.name: collected[e.file("reference_again")] for e in check.entries
             if e.k == 0 and e.file("reference_again") in collected
             and not isinstance(collected[e.file("reference_again")], Unreadable)}
    verdict = judge.Judge(check.problem, check.entries, Material(reference, again, collected),
                          known_spreads=spreads).decide(report, check.seeds)
    if check.limits.interpret and not verdict.correct:
        moved = interpreter_irreproducible(verdict.reason, verdict.message)
        verdict = replace(verdict, reason=moved[0], message=moved[1]) if moved else verdict
    return verdict


def _references(check: _Check, wanted: list[Entry]) -> tuple[dict[int, Any], dict[str, float]] | Verdict:
    """Reference outputs for `wanted` and each case's spread: kept ones, the rest from a runner
    of the original (a child that never loads the candidate)."""
    reference = {e.index: STORE.output(check.key, e.case.name, e.seed) for e in wanted}
    missing = [e for e in wanted if reference[e.index] is None]
    unmeasured = [e for e in wanted if e.k == 0 and STORE.spread(check.key, e.case.name) is None]
    if missing or unmeasured:
        check.reference_source = "ran"
        result, report = _run(check, None, {
            "count_launches": True,  # the same memory layout as the candidate's runs
            "steps": judge.steps(check.problem, missing, ("reference",)),
            "again": judge.again_steps(unmeasured)}, missing + unmeasured)
        if not result.ok:
            return _sandbox_failure(check, result, "the reference run (the original alone) failed: ")
        if report.rejected:
            rej = judge.runner_rejection(report, check.entries, who="reference")
            return Verdict.reject(rej.reason, f"the reference run (the original alone) failed: {rej.message}",
                                  seeds=check.seeds)
        fresh = _keep_references(check, result.collected or {}, missing + unmeasured)
        reference.update({e.index: fresh[e.index] for e in missing})
    spreads = {e.case.name: STORE.spread(check.key, e.case.name) or 0.0 for e in wanted if e.k == 0}
    return reference, spreads


def _together(here: Callable[[], T], there: Callable[[], U]) -> tuple[T, U]:
    """`here()` in this thread while `there()` runs in another (in a copy of this context: the
    job's limits live in a context variable); both results, once both have ended."""
    with ThreadPoolExecutor(1, thread_name_prefix="check-beside") as pool:
        future = pool.submit(contextvars.copy_context().run, there)
        return here(), future.result()


def _candidate_part(check: _Check, entries: list[Entry], hidden: bool) -> judge.Judge | Verdict:
    """The candidate's runner on `entries` first (most refusals need no reference), then the
    references; a Judge that passed them, or the verdict that refuses the candidate.

    Held-out cases run in a child of their own, and every word from it is replaced: a process
    that held held-out cases does not write a message. The held-out references the judge does
    not keep yet are run beside that child (held-out cases are checked for a track's best, which
    passed the public ones: it is rarely refused)."""
    def candidate() -> tuple[SandboxResult, RunnerReport]:
        return _run(check, check.editable, {
            "count_launches": True, "steps": judge.steps(check.problem, entries, ("candidate",))}, entries,
            None if hidden else check.in_runner)  # held-out cases never reach a runner that times

    prefetched: tuple[dict[int, Any], dict[str, float]] | Verdict | None = None
    if hidden:
        (result, report), prefetched = _together(candidate, lambda: _references(check, entries))
    else:
        result, report = candidate()
    if not result.ok:
        if hidden:
            result = replace(result, message="", stderr_tail="")
        return _sandbox_failure(check, result, "on the held-out cases: " if hidden else "")
    if hidden and report.rejected and report.step is None:
        report = replace(report, step=entries[0].index)  # its load error: a held-out run's words
    loaded = not (report.rejected and report.step is None)
    wanted = [e for e in entries if loaded and (not report.rejected or e.index < (report.step or 0))]
    if prefetched is not None and (not isinstance(prefetched, Verdict) or len(wanted) == len(entries)):
        found = prefetched
    else:  # (a failed reference run of cases the candidate never reached decides nothing)
        found = _references(check, wanted) if wanted else ({}, {})
    if isinstance(found, Verdict):
        return found
    reference, spreads = found
    part = judge.Judge(check.problem, entries, Material(reference, {}, result.collected or {}), spreads)
    verdict = part.decide(report, check.seeds)
    return part if verdict.correct else verdict


def _check_candidate(check: _Check) -> Verdict:
    """Public cases, then (when asked) held-out ones; the verdict covers every case checked.
    The held-out part's children start beside the public part's, so a held-out acceptance waits
    for one round of children rather than three in a row; the held-out answer counts only once
    the public cases passed, and its words never reach a refusal of the public ones."""
    public = [e for e in check.entries if not e.held_out]
    hidden = [e for e in check.entries if e.held_out]
    found: list[judge.Judge | Verdict]
    if public and hidden:
        found = list(_together(lambda: _candidate_part(check, public, False),
                               lambda: _candidate_part(check, hidden, True)))
    else:
        found = [_candidate_part(check, entries, entries is hidden) for entries in (public, hidden) if entries]
    parts: list[judge.Judge] = []
    for part in found:  # public first: its refusal is the answer
        if isinstance(part, Verdict):
            return part
        parts.append(part)
    return judge.Judge.merged(check.problem, check.entries, parts).accepted(check.seeds)


def evaluate_candidate(
    problem: KernelProblem,
    editable: str | None,
    *,
    held_out: bool = False,
    seeds: int = 3,
    limits: SandboxLimits | None = None,
    device: str | None = None,
    static_checks: bool = True,
    in_runner: ChildRun | None = None,
) -> Verdict:
    """Check `editable` (None: the original kernel) against the reference.

    `static_checks=False` skips the source checks (only to test the runtime defences).
    `in_runner(payload, names)`: where the candidate's public cases run instead of a child of
    their own (the candidate's loaded timing runner); references and held-out cases never do.
    Its caller holds a shared GPU turn, in which the check's other children run too. The original
    (editable None) checked against itself runs there whole: that runner loaded only the problem
    module, as the child would.
    """
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    if in_runner is not None and editable is None and (held_out or problem.needs_translation):
        raise ValueError("an original is checked in a runner on its public cases only, and a KernelBench "
                         "placeholder (the PyTorch Model) in a child of its own")
    if editable is not None and static_checks:
        found = check_source(editable, problem.editable)
        if found is not None:
            return Verdict.reject(found.reason, found.message, details={"line": found.line})
    device = device or detect_device()
    interpret = not device.startswith("cuda")
    limits = replace(limits or SandboxLimits.from_settings(interpret=interpret), interpret=interpret)
    key = problem_key(problem, device)
    base_seed = STORE.base_seed(key)
    check = _Check(problem, editable, device, limits, key, base_seed,
                   judge.plan(problem, held_out, seeds, base_seed), in_runner=in_runner)
    if editable is None:
        # a published KernelBench file's placeholder is the PyTorch Model itself: it is checked
        # to run and agree with Model, never judged as a Triton kernel (problem/translate.py)
        verdict = _check_original(check, count_launches=not problem.needs_translation)
    else:
        verdict = _check_candidate(check)
    flags = verdict.flags + (("network_not_isolated",) if check.isolated is False else ())
    details = {**verdict.details, "base_seed": base_seed, "sandbox_wall_s": check.wall_s,
               "warm": check.warm, "reference": check.reference_source if editable is not None else "ran",
               # the runners' own clocks: shown, never used to decide anything
               "runner_reported": dict(check.reported)}
    return replace(verdict, flags=flags, details=details)
