"""A candidate's correctness check run in its own timing runner, before its first prepare.

A GPU node that checks a candidate in a child of its own and times it in a runner starts two
sandboxed processes of the candidate, each importing it and compiling its kernels, and the step
then waits for whichever is slower. With `Settings.check_in_runner` the check's public cases are
the first work the candidate's loaded runner does (its `check` command, in the shared GPU turn
that starts it): one import, one compile, and the step's later calls find the kernels built.

What changes is only where the candidate's calls run. The judge names every call and file as
for a child (kernelband/evaluate/evaluator.py), reads the files with the runner stopped, so no
thread of the candidate writes while it reads, and decides by its own comparison. Reference
outputs still come from runners that never loaded a candidate, and held-out cases never reach
a runner that times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kernelband.evaluate.evaluator import ChildRun
from kernelband.evaluate.raw_outputs import read_outputs
from kernelband.evaluate.verdict import Verdict
from kernelband.profile.measurement import CandidateRefused
from kernelband.sandbox.limits import SandboxLimits, SandboxResult
from kernelband.sandbox.session import RunnerSession, SessionError


def in_session(session: RunnerSession, timeout_s: float) -> ChildRun:
    """A `ChildRun` that sends the check's steps to `session`'s loaded runner."""
    def run(payload: dict[str, Any], names: list[str]) -> SandboxResult:
        command = {"cmd": "check", **{k: v for k, v in payload.items() if k != "editable"}}
        started = time.perf_counter()
        try:
            reply = session.request(command, timeout_s).value
        except SessionError as exc:  # the runner died or hung in the candidate's calls
            return SandboxResult(False, reason=exc.reason, message=str(exc), wall_s=time.perf_counter() - started)
        if not reply.get("ok"):
            return SandboxResult(False, reason="runner_error", message=str(reply.get("error") or ""),
                                 wall_s=time.perf_counter() - started)
        session.pause()  # stopped while the judge reads: the files are what the calls left
        collected = read_outputs(session.workdir, names)
        value = {k: v for k, v in reply.items() if k != "ok"}
        return SandboxResult(True, value=value, wall_s=time.perf_counter() - started, warm=True,
                             collected=collected)
    return run


class RunnerCheck:
    """The `until_checked` of a measurement whose check runs in the candidate's runner.

    `run_in(session)` runs the check there once (a measurement taken again in fresh runners
    does not check again); calling the object before the timed rounds raises CandidateRefused
    for a refused candidate, and where no runner ran the check (a path without one), checks in
    a child of its own first. `check(in_runner)` is `evaluate_candidate` on the public cases."""

    def __init__(self, check: Callable[[ChildRun | None], Verdict], timeout_s: float | None = None) -> None:
        self.check = check
        self.timeout_s = timeout_s if timeout_s is not None else SandboxLimits.from_settings().wall_s
        self.verdict: Verdict | None = None
        self.check_s = 0.0
        self.in_runner = False  # whether the verdict came from the candidate's runner

    def _decide(self, in_runner: ChildRun | None) -> None:
        started = time.perf_counter()
        try:
            self.verdict = self.check(in_runner)
        finally:
            self.check_s += time.perf_counter() - started
        self.in_runner = in_runner is not None

    def run_in(self, session: RunnerSession) -> None:
        if self.verdict is None:
            self._decide(in_session(session, self.timeout_s))
        self._refuse()

    def alone(self) -> Verdict:
        """The verdict, checking in a child of its own if no runner checked the candidate."""
        if self.verdict is None:
            self._decide(None)
        assert self.verdict is not None
        return self.verdict

    def __call__(self) -> None:
        self.alone()
        self._refuse()

    def _refuse(self) -> None:
        if self.verdict is not None and not self.verdict.correct:
            raise CandidateRefused(f"its correctness check refused it ({self.verdict.reason})")


__all__ = ["RunnerCheck", "in_session"]
