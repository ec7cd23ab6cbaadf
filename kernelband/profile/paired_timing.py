"""Judge side of paired timing: two live runners, interleaved batches, the judge's own clock.

The original runs in one sandboxed runner and the candidate in another (never both in the
candidate's process, which could slow the original). Each round draws fresh input seeds; for
every timed case (the runners' cases, or an evenly spread subset the judge picks: `max_cases`)
the judge times one batch of k calls in each runner, in ABBA order over the rounds, with
`time.perf_counter` around the command and its reply. While one runner is timed the other is
paused (SIGSTOP to its process group), so nothing the idle one started can take the measured
one's cores. k is calibrated once on the original so a batch lasts `batch_ms`
(launch-bound kernels: many launches per synchronize; `graphs`: k replays of a CUDA graph).

After a round's batches the judge decides, at random, whether to check it (the last round
always): both runners save the last call's output to their workdir and the judge compares them
itself (`torch.load(weights_only=True)`, `compare_results`). The original's output on the same
inputs and the same call history is the reference. What a runner says about time is only
cross-checked: a runner claiming more time than the judge saw is rejected `timing_forged`.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kernelband.evaluate.compare import compare_results, tensors
from kernelband.evaluate.raw_outputs import Unreadable, load_output
from kernelband.evaluate.verified_timing import TimingRejected, output_fingerprint, same_fingerprint
from kernelband.problem.model import KernelProblem
from kernelband.profile.measurement import CandidateRefused, UntilChecked
from kernelband.profile.paired import paired_speedup
from kernelband.profile.paired_autotune import differing_picks, pin_candidate, tuned_original
from kernelband.profile.paired_commands import RunnerPair
from kernelband.profile.paired_runners import (
    ORIGINALS,
    OriginalRunnerError,
    PairedConfig,
    Runner,
    close_soon,
    spread_cases,
    start_runner,
)
from kernelband.profile.per_problem import PerProblem
from kernelband.profile.runner_check import RunnerCheck
from kernelband.sandbox.gpu_lock import gpu_turn, settle
from kernelband.sandbox.limits import SandboxLimits


@dataclass
class PairedRun:
    """The judge's per-round times (ms per call, summed over cases) and what the run cost."""

    cases: list[str]  # the timed cases: all the runners offer, or a spread subset of them
    batch: dict[str, int]
    cases_total: int = 0  # how many cases the runners offer (0: as many as were timed)
    original_ms: list[float] = field(default_factory=list)
    candidate_ms: list[float] = field(default_factory=list)
    case_original_ms: dict[str, list[float]] = field(default_factory=dict)
    case_candidate_ms: dict[str, list[float]] = field(default_factory=dict)
    verified_rounds: int = 0
    verifiable: bool = True
    output_bytes: dict[str, int] = field(default_factory=dict)  # of outputs the judge loaded
    extras: dict[str, Any] = field(default_factory=dict)  # what `measure_paired_runners(after=)` returned
    notes: list[str] = field(default_factory=list)  # e.g. a runner that could not be pinned
    # what each runner said its batches took, over what the judge saw (kept only as evidence)
    claimed_ms: dict[str, float] = field(default_factory=lambda: {"original": 0.0, "candidate": 0.0})
    judged_ms: dict[str, float] = field(default_factory=lambda: {"original": 0.0, "candidate": 0.0})
    parts_s: dict[str, float] = field(default_factory=dict)
    spare_runner: bool = False  # the candidate's runner was started ahead (paired_runners.SpareRunners)
    inputs_drawn: str = ""  # where both runners drew a harness's inputs ("device", "host"; "" without one)
    # per round, the runners' own CUDA-event figures summed over cases (diagnostics, untrusted)
    claimed_gpu_ms: dict[str, list[float]] = field(default_factory=lambda: {"original": [], "candidate": []})


# k per case, per problem and timing mode, decided once on the original's runner: only the batch
# length depends on it (both runners run the same k), so a problem's first candidate pays for it
CALIBRATIONS = PerProblem()


def _calibrate(pair: RunnerPair, cases: Sequence[str], config: PairedConfig) -> dict[str, int]:
    """k per case so that one batch of the original lasts about `batch_ms`.

    A one-call batch also holds the command's round trip, which would make k too small for
    fast calls; one batch of the first guess corrects it."""
    batch = {}
    for case in cases:
        single = min(pair.batch("original", case, 1) for _ in range(max(1, config.calibration_batches)))
        guess = _batch_size(config, single)
        batch[case] = _batch_size(config, pair.batch("original", case, guess)) if guess > 1 else guess
    return batch


def _batch_size(config: PairedConfig, per_call_ms: float) -> int:
    return int(min(config.max_batch, max(1, math.ceil(config.batch_ms / max(per_call_ms, 1e-6)))))


def _warm_up(pair: RunnerPair, cases: Sequence[str], batch: dict[str, int]) -> None:
    """One untimed batch per case in each runner. Calibration runs only the original, so the candidate's
    first calls (module load, allocator growth) would otherwise land in its first timed round: A/A below 1.0."""
    for case in cases:
        for role in ("candidate", "original"):
            pair.batch(role, case, batch[case])


def _verify(pair: RunnerPair, problem: KernelProblem, case: str, round_no: int) -> int:
    """Both runners save their last output of `case`; the judge compares them itself and
    returns the bytes the candidate's output spans (for the physical floor)."""
    loaded = {}
    for role, runner in pair.runners.items():
        name = f"out-{role}-{round_no}.pt"
        pair.ask(role, {"cmd": "save_output", "case": case, "name": name})
        loaded[role] = load_output(runner.session.path(name))
        if isinstance(loaded[role], Unreadable):
            raise TimingRejected(f"timing_output_not_plain:round={round_no}", f"the {role}'s output of "
                                 f"{case} could not be read ({loaded[role].detail}); return tensors, "
                                 "lists, tuples or numbers")
        committed = pair.committed.get(role)
        if role == "candidate" and not same_fingerprint(committed, output_fingerprint(loaded[role])):
            raise TimingRejected(f"timing_output_not_from_batch:round={round_no}", f"the output saved "
                                 f"for {case} is not the one the timed batch ended with; a timed call's "
                                 "result must be the result of that call")
    if found := compare_results(loaded["original"], loaded["candidate"], problem.tolerance):
        raise TimingRejected(f"timing_output_mismatch:round={round_no},case={case}",
                             f"a timed call of {case} (round {round_no}) returned a wrong result "
                             f"({found.reason} at {found.where}: {found.detail}); every timed call must be right")
    return sum(int(t.numel()) * t.element_size() for t in tensors(loaded["candidate"]))


def prepare_first(pair: RunnerPair, config: PairedConfig, rng: random.Random) -> tuple[list[str], float]:
    """The timed cases (the judge's pick, the same for both runners) and their first inputs in
    both runners, which compiles and autotunes: untimed work, which need not have the GPU alone.
    Returns the cases and the seconds taken; raises TimingRejected when the runners' cases
    differ, OriginalRunnerError when they drew a harness's inputs in different places."""
    original, candidate = pair.runners["original"], pair.runners["candidate"]
    if candidate.cases != original.cases:
        raise TimingRejected("timing_cases_differ", f"the candidate's runner offers cases "
                             f"{candidate.cases} where the original has {original.cases}")
    if candidate.inputs_drawn != original.inputs_drawn:
        # the same seed gives other values elsewhere. Which one is drawn where follows the
        # harness's code, the same in both, except a draw that did not fit on the device then
        # (a warm original drew while the GPU was emptier): fresh runners, not a verdict
        raise OriginalRunnerError("runners_drew_inputs_apart", f"the candidate's runner drew the harness's "
                                  f"inputs on the {candidate.inputs_drawn or 'host'} where the original's drew "
                                  f"them on the {original.inputs_drawn or 'host'}: the two would be timed on "
                                  "different inputs")
    cases = spread_cases(original.cases, config.max_cases)
    started = time.perf_counter()
    pair.prepare(cases, rng.randrange(1, 1 << 30))
    return cases, time.perf_counter() - started


def time_pair(problem: KernelProblem, pair: RunnerPair, config: PairedConfig, rng: random.Random,
              calibration_key: str = "", first: tuple[list[str], float] | None = None,
              settle: Callable[[], None] = lambda: None) -> PairedRun:
    """Calibrate (once per `calibration_key`: the original and the timing mode), then run the
    interleaved rounds; raises TimingRejected on a broken rule. `first`: what `prepare_first`
    returned, when the caller prepared the cases already (outside the GPU's exclusive turn).
    `settle()` returns once the GPU work of the processes the turn stopped has finished: called
    before the first timed batch, so the untimed warm-up runs while it drains."""
    original, candidate = pair.runners["original"], pair.runners["candidate"]
    cases, prepared_s = first or prepare_first(pair, config, rng)
    started = time.perf_counter()
    key = f"{calibration_key}:{config.batch_ms}:{config.max_batch}:{','.join(cases)}"
    batch = CALIBRATIONS.get(key) if calibration_key else None
    calibrate_s = 0.0  # a problem calibrated before costs nothing here
    if batch is None:
        settle()  # calibration batches are timed
        batch = _calibrate(pair, cases, config)
        calibrate_s = time.perf_counter() - started
        if calibration_key:
            CALIBRATIONS.keep(key, batch)
    run = PairedRun(cases, batch, len(original.cases), verifiable=candidate.verifiable,
                    inputs_drawn=original.inputs_drawn)
    _warm_up(pair, cases, run.batch)
    settle()
    run.notes = [f"{role}'s runner {r.unpinned}" for role, r in pair.runners.items() if r.unpinned]
    run.case_original_ms = {c: [] for c in cases}
    run.case_candidate_ms = {c: [] for c in cases}
    run.parts_s = {"calibrate": calibrate_s, "prepare": prepared_s, "inputs": 0.0, "timed_rounds": 0.0, "verify": 0.0}
    for round_no in range(config.rounds):
        _one_round(problem, pair, run, config, rng, round_no)
        if _settled(run, config):
            break
    if run.verifiable:  # every case's last batch is checked (and gives its output's size)
        started = time.perf_counter()
        for case in cases:
            if case not in run.output_bytes:  # one more untimed batch in both, to check its output
                salt = rng.randrange(1 << 30)
                for role in pair.runners:
                    pair.batch(role, case, run.batch[case], salt)
                run.output_bytes[case] = _verify(pair, problem, case, config.rounds)
        run.parts_s["verify"] += time.perf_counter() - started
    run.notes += differing_picks(pair.ask)
    pair.pause_both()
    run.claimed_ms, run.judged_ms = pair.claimed_ms, pair.judged_ms
    return run


def _settled(run: PairedRun, config: PairedConfig) -> bool:
    """Enough rounds: at least `min_rounds`, and an interval already as narrow as asked."""
    if not config.settle_width or len(run.original_ms) < min(config.min_rounds, config.rounds):
        return False
    if len(run.original_ms) >= config.rounds:
        return True
    interval = paired_speedup(run.original_ms, run.candidate_ms, method="settling")
    return interval.high / interval.low <= config.settle_width


def _one_round(problem: KernelProblem, pair: RunnerPair, run: PairedRun, config: PairedConfig,
               rng: random.Random, round_no: int) -> None:
    """Fresh inputs, one batch per case in each runner (AB or BA), then maybe a check."""
    cases = run.cases
    started = time.perf_counter()
    shuffle = config.shuffle_layout and config.clock == "wall"  # on a GPU: placement varies too
    if run.verifiable or shuffle:  # fresh inputs per round (a harness draws its next ones)
        pair.prepare(cases, rng.randrange(1, 1 << 30), rng if shuffle else None)
    run.parts_s["inputs"] += time.perf_counter() - started
    order = ("original", "candidate") if round_no % 2 == 0 else ("candidate", "original")
    started = time.perf_counter()
    checked = rng.choice(cases)  # drawn now, revealed only after both batches replied
    commitments: dict[str, Any] = {}
    for case in cases:
        salt = rng.randrange(1 << 30)
        for role in order:
            per_call = pair.batch(role, case, run.batch[case], salt)
            (run.case_original_ms if role == "original" else run.case_candidate_ms)[case].append(per_call)
        if case == checked:
            commitments = dict(pair.committed)
    run.parts_s["timed_rounds"] += time.perf_counter() - started
    run.original_ms.append(sum(run.case_original_ms[c][-1] for c in cases))
    run.candidate_ms.append(sum(run.case_candidate_ms[c][-1] for c in cases))
    for role in pair.runners:
        if len(pair.claimed_gpu_ms[role]) >= len(cases):
            run.claimed_gpu_ms[role].append(sum(pair.claimed_gpu_ms[role][-len(cases):]))
    if run.verifiable and (round_no == config.rounds - 1 or rng.random() < config.verify_fraction):
        started = time.perf_counter()
        pair.committed = commitments
        run.output_bytes[checked] = _verify(pair, problem, checked, round_no)
        run.verified_rounds += 1
        run.parts_s["verify"] += time.perf_counter() - started


# how a problem's original could be measured when its first way failed (inputs at fixed
# addresses; the test's calls instead of its harness), kept for the problem's later candidates:
# each would otherwise start runners that fail the same way first, tens of seconds of a GPU task
FALLBACKS = PerProblem()


def measure_paired_runners(
    problem: KernelProblem, editable: str | None, device: str, config: PairedConfig | None = None, *,
    limits: SandboxLimits | None = None, keep_original: bool = True,
    after: Callable[[Runner, PairedRun], dict[str, Any]] | None = None, until_checked: UntilChecked | None = None,
) -> PairedRun:
    """Time `editable` against the problem's original in two runners (see the module doc).

    `after(candidate, run)` runs before the candidate's runner closes (e.g. its features);
    what it returns is `run.extras`. `until_checked()` runs once both runners are ready, before
    the exclusive turn: a candidate it refuses (CandidateRefused) is never timed. A failing
    original's runner is never held against the candidate: the measurement is taken again in
    fresh runners, first with the inputs at fixed addresses, then (a TritonBench-G problem with a
    performance harness) with the test's calls into the region, each fallback named in `run.notes`
    and kept for the problem's later measurements; the failed tries' seconds are `parts_s["retried"]`."""
    config = config or PairedConfig()
    key = ORIGINALS.key(problem, device, config, (limits or SandboxLimits.from_settings()).cache_scope)
    ways = _ways(problem, device, config, keep_original)
    known = FALLBACKS.get(key)
    if known is not None and known["way"] not in ways:
        known = None
    failure: OriginalRunnerError | None = None
    retried = 0.0  # the failed tries' seconds: a step's parts then add up
    for way, note in ways.items():
        if failure is None and known is not None and way != known["way"]:
            continue  # an earlier measurement of this problem found this way failing
        started = time.perf_counter()
        try:
            run = _measure_once(replace(problem, perf_source="") if way == "calls" else problem, editable, device,
                                config if way == "first" else replace(config, shuffle_layout=False),
                                limits, keep_original and failure is None, after, until_checked)
        except OriginalRunnerError as exc:
            failure, retried = exc, retried + time.perf_counter() - started
            continue
        if failure is not None:
            run.parts_s["retried"] = retried
            if way != "first":
                FALLBACKS.keep(key, {"way": way, "reason": failure.reason, "message": str(failure)[:200]})
        if note and failure is not None:
            run.notes.append(note.format(reason=failure.reason, message=str(failure)[:200]))
        elif note and known is not None:
            run.notes.append(note.format(**known) + " (as this problem's earlier measurement found)")
        return run
    assert failure is not None  # the first way, or the one kept, was tried
    raise failure


def _ways(problem: KernelProblem, device: str, config: PairedConfig, keep_original: bool) -> dict[str, str]:
    """The ways to measure, in order: as configured; with the inputs at fixed addresses (a
    fresh original, its inputs where they first land: an original that reads a little past its
    buffers can fault once a shifted input ends at the edge of its allocation); with the test's
    calls (the harness's own inputs can be what the original cannot take, its largest sizes say)."""
    shuffled = config.shuffle_layout and config.clock == "wall" and device.startswith("cuda")
    ways = {"first": ""}  # each way and the note a measurement taken that way carries
    if keep_original or shuffled:
        ways["fixed"] = "inputs at fixed addresses: with fresh placement the original failed ({reason})" if shuffled else ""
    if problem.perf_source:
        ways["calls"] = ("timed with the test's calls into the region: the performance harness failed in the "
                         "original's runner ({reason}: {message})")
    return ways


def _measure_once(problem: KernelProblem, editable: str | None, device: str, config: PairedConfig,
                  limits: SandboxLimits | None, keep_original: bool,
                  after: Callable[[Runner, PairedRun], dict[str, Any]] | None,
                  until_checked: UntilChecked | None = None) -> PairedRun:
    rng = random.Random(config.seed if config.seed is not None else random.SystemRandom().randrange(1 << 30))
    parts: dict[str, float] = {}
    start = time.perf_counter()
    original, picks = tuned_original(problem, device, config, limits, keep_original, parts)  # autotuned once
    parts["load_original"] = time.perf_counter() - start
    try:
        pair, tuning, first = _start_candidate(problem, editable, device, config, limits, original, picks,
                                               rng, parts, until_checked)
        candidate = pair.runners["candidate"]
        try:
            if until_checked is not None:
                until_checked()
            own = tuple(runner.session.pid for runner in pair.runners.values())
            # the timed rounds have the GPU alone
            with gpu_turn(device, exclusive=True, own=own, settle_later=True) as turn:
                held = time.perf_counter()
                run = time_pair(problem, pair, config, rng, ORIGINALS.key(problem, device, config, original.scope),
                                first, lambda: settle(turn))
            # what this measurement cost the node's other GPU tasks: every second they could not
            # start a shared turn (a first prepare is a shared turn's, whatever the part's name)
            parts["held_alone"] = parts.get("held_alone", 0.0) + time.perf_counter() - held
            run.notes, run.spare_runner = tuning + run.notes, candidate.spare
            parts["wait_gpu"] = turn["waited_s"]
            if turn.get("preempted"):
                parts["preempted"] = turn["preempted"]  # other tasks' process groups stopped meanwhile
            if after is not None:
                start = time.perf_counter()
                with gpu_turn(device, exclusive=False):
                    run.extras = after(candidate, run)
                parts["after"] = time.perf_counter() - start
        finally:
            close_soon(candidate)
    except (TimingRejected, CandidateRefused):
        _release(original, problem, device, config, keep_original)  # the candidate's fault
        raise
    except BaseException:
        original.close()  # after another failure its state is not worth keeping
        raise
    _release(original, problem, device, config, keep_original)
    run.parts_s = parts | run.parts_s
    return run


def _start_candidate(problem: KernelProblem, editable: str | None, device: str, config: PairedConfig,
                     limits: SandboxLimits | None, original: Runner, picks: dict[str, Any], rng: random.Random,
                     parts: dict[str, float], until_checked: UntilChecked | None = None,
                     ) -> tuple[RunnerPair, list[str], tuple[list[str], float]]:
    """In one shared GPU turn: the candidate's runner, the problem's autotune picks pinned in it,
    its correctness check where the check runs in it (a RunnerCheck) and both runners' first
    inputs (compiles, untimed), so the exclusive turn holds timing only."""
    start = time.perf_counter()
    with gpu_turn(device, exclusive=False) as turn:
        # the wait is other candidates' timed rounds, not this runner's start: kept apart
        parts["wait_shared"] = turn["waited_s"]
        candidate = start_runner(problem, editable, device, config, limits)
        parts["load_candidate"] = time.perf_counter() - start - turn["waited_s"]
        try:
            pair = RunnerPair(original, candidate, config)
            tuning = pin_candidate(candidate, picks, config)
            if isinstance(until_checked, RunnerCheck):
                checked = time.perf_counter()
                until_checked.run_in(candidate.session)
                parts["check_in_runner"] = time.perf_counter() - checked
            return pair, tuning, prepare_first(pair, config, rng)
        except BaseException:
            close_soon(candidate)
            raise


def _release(original: Runner, problem: KernelProblem, device: str, config: PairedConfig, keep: bool) -> None:
    if keep:
        ORIGINALS.give_back(problem, device, config, original)
    else:
        original.close()
