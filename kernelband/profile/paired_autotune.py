"""Judge side of autotuned kernels in paired timing (kernelband/runner/autotune.py says why).

Triton's autotuner times every config on a kernel's first call with a new key, and a process
that has done so is not a fair one to time: on an H200, A/A runs in which only the original's
runner had autotuned (the candidate's took its picks) measured the candidate 1.4-4% faster on
all seven autotuned problems, steadily, round after round. So a problem's configs are picked
once, in a tuning runner of the original that prepares every case alone on the GPU and is then
closed; every timed runner, the original's and each candidate's, starts fresh and takes those
picks before its first call (for kernels whose source and configs are unchanged: a kernel the
candidate changed autotunes on its own). A problem whose source never names `autotune` skips
the tuning pass; one whose kernels pick nothing keeps its tuning runner as its original's. After the rounds, picks that still differ between the two runners
are named in the run's notes (the runners' own word, a diagnostic: it changes no figure).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.profile.paired_runners import (
    ORIGINALS,
    OriginalRunnerError,
    PairedConfig,
    Runner,
    runner_error,
    start_runner,
    start_spare,
)
from kernelband.profile.per_problem import PerProblem
from kernelband.sandbox.gpu_lock import gpu_turn
from kernelband.sandbox.limits import SandboxLimits
from kernelband.sandbox.session import SessionError

Ask = Callable[[str, dict[str, Any]], tuple[dict[str, Any], float]]
TUNING_SEED = 1  # the inputs the tuning runner autotunes on: only their shapes and dtypes matter


PICKS = PerProblem()  # autotune picks per original (`ORIGINALS.key`), decided once per process


def _ask(runner: Runner, role: str, command: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    try:
        reply: dict[str, Any] = runner.session.request(command, timeout_s).value
    except SessionError as exc:
        raise runner_error(role, f"runner_{exc.reason}", f"the {role}'s runner failed: {exc}") from exc
    if not reply.get("ok"):
        raise runner_error(role, "runner_error", f"the {role}'s runner refused {command['cmd']}: "
                           f"{reply.get('error')}")
    return reply


def _tune(runner: Runner, device: str, config: PairedConfig, parts: dict[str, float]) -> dict[str, Any]:
    """Every case prepared once (its first call autotunes), alone on the GPU; the picks. The
    exclusive turn's length goes to `parts["tune"]` and `parts["held_alone"]`.

    `config.compile_before_tuning`: first, in a shared turn, every case prepared with the
    autotuners running each config once and timing none (their compiles; `parts["tune_compile"]`),
    so the exclusive turn times configs that are compiled already. The picks still come from
    timings taken alone on the GPU."""
    def prepare_every_case() -> None:  # fresh: each case called again, where it was before
        for case in runner.cases:
            _ask(runner, "original", {"cmd": "prepare", "case": case, "seed": TUNING_SEED, "fresh": True},
                 config.load_timeout_s)

    if config.compile_before_tuning:
        started = time.perf_counter()
        with gpu_turn(device, exclusive=False):
            _ask(runner, "original", {"cmd": "autotune_compile_only", "on": True}, config.command_timeout_s)
            prepare_every_case()
            _ask(runner, "original", {"cmd": "autotune_compile_only", "on": False}, config.command_timeout_s)
        parts["tune_compile"] = time.perf_counter() - started
    with gpu_turn(device, exclusive=True, own=(runner.session.pid,)):
        held = time.perf_counter()
        try:
            prepare_every_case()
            found = _ask(runner, "original", {"cmd": "autotune_picks"}, config.command_timeout_s).get("picks")
        finally:
            parts["tune"] = time.perf_counter() - held
            parts["held_alone"] = parts.get("held_alone", 0.0) + parts["tune"]
    return found if isinstance(found, dict) else {}


def tuned_original(problem: KernelProblem, device: str, config: PairedConfig, limits: SandboxLimits | None,
                   keep: bool, parts: dict[str, float] | None = None) -> tuple[Runner, dict[str, Any]]:
    """The original's runner, with its autotuned kernels on the problem's picks; the picks.
    `parts` takes the tuning pass's exclusive turn, when this call makes one."""
    # picks a job's tuning runner read from its own Triton cache serve that job only
    key = ORIGINALS.key(problem, device, config, (limits or SandboxLimits.from_settings()).cache_scope)
    runner = ORIGINALS.take_idle(problem, device, config, limits) if keep else None
    if runner is None:  # only a new runner uses the GPU: a warm one is taken without a turn
        start_spare(problem, device, config, limits)  # the candidate's runner, meanwhile
        with gpu_turn(device, exclusive=False):
            runner = start_runner(problem, None, device, config, limits, role="original")
    picks = PICKS.get(key)
    if picks is None and "autotune" not in problem.source:
        PICKS.keep(key, picks := {})  # read as text only: no autotuner, nothing to tune apart
    if picks is None:
        try:
            picks = _tune(runner, device, config, {} if parts is None else parts)
        except BaseException:
            runner.close()
            raise
        PICKS.keep(key, picks)
        if not picks:
            return runner, picks  # nothing autotuned: this runner is as fresh as a new one
        runner.close()
        with gpu_turn(device, exclusive=False):
            runner = start_runner(problem, None, device, config, limits, role="original")
    if picks:
        _ask(runner, "original", {"cmd": "pin_autotune", "pins": picks}, config.command_timeout_s)
    return runner, picks


def pin_candidate(candidate: Runner, picks: dict[str, Any], config: PairedConfig) -> list[str]:
    """The problem's picks to the candidate's runner; a note naming what each side ran."""
    if not picks:
        return []
    try:
        reply = _ask(candidate, "candidate", {"cmd": "pin_autotune", "pins": picks}, config.command_timeout_s)
    except TimingRejected as exc:  # a runner that will not take them autotunes on its own
        return [f"autotune picks not taken by the candidate's runner: {str(exc)[:200]}"]
    pinned = sorted(str(name) for name in reply.get("pinned") or [] if name in picks)
    own = sorted(set(picks) - set(pinned))
    note = ("autotuned kernels ran the configs a separate tuning runner of the original picked"
            + (f", in both runners: {', '.join(pinned)}" if pinned else "")
            + (f"; changed by the candidate, autotuned in its runner: {', '.join(own)}" if own else ""))
    return [note]


def _picks(ask: Ask, role: str) -> dict[str, Any] | None:
    try:
        reply, _ = ask(role, {"cmd": "autotune_picks"})
    except (OriginalRunnerError, TimingRejected):
        return None
    found = reply.get("picks")
    return found if isinstance(found, dict) else None


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
