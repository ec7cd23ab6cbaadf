"""Live runners of paired timing: how one starts with a problem loaded, and the warm originals.

A GPU worker keeps the original's runner of the last problems it measured (`ORIGINALS`), compiled,
between candidates. Its times are not reused: a speedup is paired, timed beside every candidate."""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from kernelband.config import get_settings
from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.profile.measurement import MeasureError
from kernelband.profile.paired import RUNNER_SD, RUNNER_SD_SHARE
from kernelband.sandbox.gpu_lock import gpu_turn
from kernelband.sandbox.limits import SandboxLimits, SandboxResult
from kernelband.sandbox.session import RunnerSession, SessionError

log = logging.getLogger(__name__)

RUNNER_TARGET = "kernelband.runner.timing:serve_task"
# a TritonBench-G harness draws its inputs when it loads: every runner draws them from this seed
HARNESS_SEED = 0
RECYCLE_CPU_SHARE = 0.5  # a warm original is replaced once it used this share of its CPU limit
SPARE_MAX_AGE_SHARE = 0.25  # a spare older than this share of its wall limit is not taken


@dataclass(frozen=True)
class PairedConfig:
    """How a paired measurement runs. `cores`: the measuring core set (empty: no pinning)."""

    rounds: int = 20  # at most; fewer once the interval is narrow enough (below)
    # stop after `min_rounds` once the 95% interval's high/low is at most `settle_width`
    # (0: always run `rounds`); sequential, so coverage is checked by the A/A runs
    min_rounds: int = 8
    settle_width: float = 1.03
    batch_ms: float = 10.0
    max_batch: int = 2000
    calibration_batches: int = 3
    verify_fraction: float = 0.25
    pause_idle: bool = True
    graphs: bool = False
    # on a GPU, fresh inputs at randomly shifted addresses every round (paired_commands.PAD_MAX_BYTES)
    shuffle_layout: bool = True
    cores: tuple[int, ...] = ()
    command_timeout_s: float = 120.0
    load_timeout_s: float = 600.0
    seed: int | None = None  # the judge's draws (input seeds, checked rounds); None: fresh
    # "wall": the judge's perf_counter around each batch (GPU). "cpu": the CPU time the OS
    # charged to the runner's processes during the batch, read by the judge from /proc (the
    # interpreter on a shared host, where wall time measures the host's load, not the calls)
    clock: str = "wall"
    # between-runner variation added to a GPU measurement's interval (profile/paired.py)
    runner_sd: float = RUNNER_SD
    runner_share: float = RUNNER_SD_SHARE
    # time at most this many of the runner's cases, evenly spread (`spread_cases`); 0: every case
    max_cases: int = 0
    compile_before_tuning: bool = False  # tuning compiles its configs in a shared turn first (paired_autotune)
    inputs_on_device: bool = True  # a harness draws its inputs on the GPU (perf_harness.draw_inputs)

    def __post_init__(self) -> None:
        if self.clock not in ("wall", "cpu"):
            raise ValueError(f"clock must be 'wall' or 'cpu', not {self.clock!r}")
        if self.max_cases < 0:
            raise ValueError(f"max_cases={self.max_cases}: at least 0 (0: every case)")
        if self.rounds < 3 or self.min_rounds < 3:
            raise ValueError(f"rounds={self.rounds}, min_rounds={self.min_rounds}: a paired interval needs "
                             "at least 3 rounds")

    @property
    def how(self) -> str:
        calls = "CUDA graph replays" if self.graphs else "launches"
        clock = "judge clock" if self.clock == "wall" else "runner CPU time read by the judge from /proc"
        return f"{clock} around batches of {calls}, ABBA rounds, two runners"


def spread_cases(cases: Sequence[str], max_cases: int) -> list[str]:
    """The cases a pair times: all of them when `max_cases` is 0 or covers them, else that many
    evenly spread in their order, first and last included; one: the last (a harness's inputs
    usually grow, so its largest). Steps over 1 never round to the same index twice."""
    n, m = len(cases), max_cases
    if m <= 0 or n <= m:
        return list(cases)
    if m == 1:
        return [cases[-1]]
    return [cases[round(i * (n - 1) / (m - 1))] for i in range(m)]


class OriginalRunnerError(MeasureError):
    """The original's runner failed: no verdict on the candidate; `reason` names what failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def runner_error(role: str, reason: str, message: str) -> Exception:
    """A candidate's runner breaking a rule is its rejection; the original's a failure to measure."""
    if role == "original":
        return OriginalRunnerError(f"original_{reason}", message)
    return TimingRejected(reason, message)


@dataclass
class Runner:
    """A live runner session with a problem loaded: the cases it times, whether outputs are checked."""

    session: RunnerSession
    cases: list[str]
    verifiable: bool
    unpinned: str = ""  # why it is not on the measuring cores it was asked to use ("" when it is)
    spare: bool = False  # started ahead of its candidate (SpareRunners)
    inputs_drawn: str = ""  # a harness's inputs: "device" or "host" (perf_harness.draw_inputs)

    @property
    def closed(self) -> bool:
        return self.session.closed is not None

    @property
    def scope(self) -> str:
        """The job whose Triton cache this runner compiles in (SandboxLimits.cache_scope)."""
        return self.session.limits.cache_scope

    def close(self) -> SandboxResult:
        return self.session.close()


_CLOSING: set[threading.Thread] = set()  # runners being closed by close_soon
_CLOSING_LOCK = threading.Lock()


def close_soon(runner: Runner) -> None:
    """Close `runner` on a thread of its own: its exit (interpreter and CUDA context torn down)
    takes seconds the step has no use for. An exiting process waits for them (`wait_for_closes`)."""
    def close() -> None:
        try:
            runner.close()
        finally:
            with _CLOSING_LOCK:
                _CLOSING.discard(threading.current_thread())

    thread = threading.Thread(target=close, name="close-runner", daemon=True)
    with _CLOSING_LOCK:
        _CLOSING.add(thread)
    thread.start()


def wait_for_closes(timeout_s: float = 30.0) -> None:
    """Wait (at most `timeout_s` each) for the runners `close_soon` is still closing."""
    with _CLOSING_LOCK:
        closing = list(_CLOSING)
    for thread in closing:
        thread.join(timeout_s)


def timed_call(problem: KernelProblem, editable: str | None) -> str:
    """What a runner times: the region's entry, or the PyTorch reference of a KernelBench file
    not yet translated (the baseline its translations are compared with, and itself)."""
    return "reference" if problem.needs_translation and editable is None else "candidate"


def runner_limits(limits: SandboxLimits | None, device: str, config: PairedConfig) -> SandboxLimits:
    """A timing runner's limits: the node's (or the job's), with the device's interpreter
    setting, no compile limit of its own and at least the load timeout as its wall limit."""
    limits = limits or SandboxLimits.from_settings()
    return replace(limits, interpret=not device.startswith("cuda"), compile_s=0.0,
                   wall_s=max(limits.wall_s, config.load_timeout_s))


def start_runner(problem: KernelProblem, editable: str | None, device: str, config: PairedConfig,
                 limits: SandboxLimits | None, role: str = "candidate") -> Runner:
    """A runner session with `editable` loaded. A candidate that cannot load is rejected
    (TimingRejected); an original that cannot is not the candidate's fault (OriginalRunnerError).
    A candidate takes the problem's spare runner when one is ready, and a new spare is started
    for the problem's next candidate."""
    limits = runner_limits(limits, device, config)
    load = {"cmd": "load", "problem": problem.to_dict(), "editable": editable, "device": device,
            "graphs": config.graphs, "seed": HARNESS_SEED, "call": timed_call(problem, editable),
            "inputs_on_device": config.inputs_on_device}
    spare = SPARES.take(problem, device, config, limits) if role == "candidate" else None
    if role == "candidate":
        SPARES.start_soon(problem, device, config, limits)
    if spare is not None:
        try:
            reply = spare.request(load, config.load_timeout_s).value
        except SessionError:
            # a spare that died while it waited is no verdict on the candidate: a fresh runner
            # loads it again, and a candidate that kills its runner fails there too
            spare.close()
        else:
            return _loaded(spare, reply, role, True)
    session = RunnerSession(RUNNER_TARGET, {"cores": list(config.cores) or None}, limits)
    try:
        reply = session.request(load, config.load_timeout_s).value
    except SessionError as exc:
        session.close()
        raise runner_error(role, f"runner_{exc.reason}", f"the {role}'s runner failed to load: {exc}") from exc
    return _loaded(session, reply, role, False)


def start_spare(problem: KernelProblem, device: str, config: PairedConfig, limits: SandboxLimits | None) -> None:
    """Start the runner a candidate of `problem` will take, now (a spare, where spares are kept):
    called as an original's runner starts, so the two start side by side, not one after the other."""
    SPARES.start_soon(problem, device, config, runner_limits(limits, device, config))


def _loaded(session: RunnerSession, reply: dict[str, Any], role: str, spare: bool) -> Runner:
    if not reply.get("ok"):
        session.close()
        raise runner_error(role, "runner_load_failed", f"the {role}'s runner could not load the kernel: "
                           f"{reply.get('error')}")
    return Runner(session, [str(c) for c in reply["cases"]], bool(reply.get("verifiable")),
                  str(reply.get("unpinned") or ""), spare, str(reply.get("inputs_drawn") or ""))


class OriginalRunners:
    """Warm runners of originals, one per (problem, device, timing mode, job), reused by candidates
    (`Settings.warm_originals`, 8: a suite interleaves its jobs; each keeps one CUDA context).

    Each keeps the original's compiled module loaded; its inputs are rebuilt per round (fresh
    seeds), and its baseline is re-timed beside every candidate, since a speedup is paired. A
    runner is taken for one measurement and given back after it (two measurements at once get
    two runners); one that has used half its CPU-time limit is replaced before it hits it."""

    def __init__(self, size: int | None = None) -> None:
        self._size = size  # None: Settings.warm_originals, read when one is given back
        self.idle: dict[str, Runner] = {}
        self.lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._size if self._size is not None else get_settings().warm_originals

    @staticmethod
    def key(problem: KernelProblem, device: str, config: PairedConfig, scope: str = "") -> str:
        """A problem's original in one timing mode, for one job (`scope`, its Triton cache): a
        runner that compiled in one job's cache never serves another job."""
        text = json.dumps([problem.to_dict(), device, config.graphs, list(config.cores), scope,
                           config.inputs_on_device], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def take(self, problem: KernelProblem, device: str, config: PairedConfig, limits: SandboxLimits | None) -> Runner:
        return self.take_idle(problem, device, config, limits) or start_runner(
            problem, None, device, config, limits, role="original")

    def take_idle(self, problem: KernelProblem, device: str, config: PairedConfig,
                  limits: SandboxLimits | None) -> Runner | None:
        """The problem's idle runner (a worn or dead one is closed instead), or None."""
        scope = (limits or SandboxLimits.from_settings()).cache_scope
        with self.lock:
            runner = self.idle.pop(self.key(problem, device, config, scope), None)
        if runner is not None and not runner.closed and not _worn(runner):
            return runner
        if runner is not None:
            runner.close()
        return None

    def give_back(self, problem: KernelProblem, device: str, config: PairedConfig, runner: Runner) -> None:
        if runner.closed:
            return
        runner.session.pause()  # idle until the next candidate: it takes no core meanwhile
        slot = self.key(problem, device, config, runner.scope)
        with self.lock:
            old = self.idle.pop(slot, None)
            self.idle[slot] = runner
            evicted = [self.idle.pop(next(iter(self.idle))) for _ in range(len(self.idle) - self.size)]
        for other in ([old] if old is not None else []) + evicted:
            other.close()

    def close_all(self) -> None:
        with self.lock:
            runners, self.idle = list(self.idle.values()), {}
        for runner in runners:
            runner.close()


class SpareRunners:
    """Candidate runners started ahead (`Settings.spare_runners`, one per problem and job): a
    fresh sandboxed runner makes its device context, imports the original and draws the harness's
    inputs (`preload`: on an H200 most of a runner's start, up to 7.7 s), then waits, stopped, for
    the problem's next candidate. It runs nothing but the problem's own module before it, is taken
    once, and is keyed by everything its start depended on (problem, device, mode, cores, limits)."""

    def __init__(self, size: int | None = None, gpu_only: bool = True) -> None:
        self._size = size  # None: Settings.spare_runners
        # on the interpreter a spare would only take the host's cores from the run it waits for
        self.gpu_only = gpu_only
        self.ready: OrderedDict[str, tuple[RunnerSession, float]] = OrderedDict()
        self.starting: set[str] = set()
        self.in_turn: set[str] = set()  # starting, and holding their shared GPU turn
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    @property
    def size(self) -> int:
        return self._size if self._size is not None else get_settings().spare_runners

    @staticmethod
    def key(problem: KernelProblem, device: str, config: PairedConfig, limits: SandboxLimits) -> str:
        text = json.dumps([OriginalRunners.key(problem, device, config, limits.cache_scope), limits.to_dict()],
                          sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def take(self, problem: KernelProblem, device: str, config: PairedConfig,
             limits: SandboxLimits) -> RunnerSession | None:
        """The problem's spare, if one is ready and young enough to serve a whole measurement.
        One still starting inside its GPU turn is waited for: it is further along than a fresh
        runner would be, and it needs no lock that the caller's turn could keep from it."""
        key = self.key(problem, device, config, limits)
        with self.changed:
            self.changed.wait_for(lambda: key not in self.in_turn, config.load_timeout_s)
            spare = self.ready.pop(key, None)
        if spare is None:
            return None
        session, started = spare
        if session.closed is None and time.monotonic() - started < SPARE_MAX_AGE_SHARE * limits.wall_s:
            return session
        close_soon(Runner(session, [], False))
        return None

    def start_soon(self, problem: KernelProblem, device: str, config: PairedConfig, limits: SandboxLimits) -> None:
        """Start a spare for `problem` on a thread of its own, unless one is ready or starting."""
        key = self.key(problem, device, config, limits)
        now = time.monotonic()
        with self.lock:  # spares no candidate came for in time go (their memory with them)
            stale = [k for k, (_, started) in self.ready.items() if now - started >= SPARE_MAX_AGE_SHARE * limits.wall_s]
            expired = [self.ready.pop(k)[0] for k in stale]
        for session in expired:
            close_soon(Runner(session, [], False))
        with self.lock:
            if (self.size <= 0 or key in self.ready or key in self.starting
                    or (self.gpu_only and not device.startswith("cuda"))):
                return
            self.starting.add(key)
        threading.Thread(target=self._start, args=(key, problem, device, config, limits), name="spare-runner",
                         daemon=True).start()

    def _start(self, key: str, problem: KernelProblem, device: str, config: PairedConfig,
               limits: SandboxLimits) -> None:
        session: RunnerSession | None = None
        try:
            started = time.monotonic()
            session = RunnerSession(RUNNER_TARGET, {"cores": list(config.cores) or None}, limits)
            with gpu_turn(device, exclusive=False):  # a context made while another is timed would disturb it
                with self.lock:
                    self.in_turn.add(key)
                for command in ({"cmd": "init_device", "device": device},
                                {"cmd": "preload", "problem": problem.to_dict(), "device": device,
                                 "seed": HARNESS_SEED, "inputs_on_device": config.inputs_on_device}):
                    if not session.request(command, config.load_timeout_s).value.get("ok"):
                        raise SessionError("preload_failed", f"a spare runner refused {command['cmd']}")
            session.pause()  # idle until its candidate comes: it takes no core meanwhile
        except Exception:  # noqa: BLE001 - a spare is an optimisation: whatever failed, there is none
            log.info("no spare runner for %s: it failed to start", problem.name, exc_info=True)
            if session is not None:
                close_soon(Runner(session, [], False))
            with self.changed:
                self.starting.discard(key)
                self.in_turn.discard(key)
                self.changed.notify_all()
            return
        with self.changed:
            self.starting.discard(key)
            self.in_turn.discard(key)
            self.ready[key] = (session, started)
            self.changed.notify_all()
            evicted = [self.ready.pop(next(iter(self.ready)))[0] for _ in range(len(self.ready) - self.size)]
        for old in evicted:
            close_soon(Runner(old, [], False))

    def close_all(self) -> None:
        with self.lock:
            spares, self.ready = [s for s, _ in self.ready.values()], OrderedDict()
        for session in spares:
            session.close()


def _worn(runner: Runner) -> bool:
    return runner.session.cpu_seconds() > RECYCLE_CPU_SHARE * runner.session.limits.cpu_s


ORIGINALS = OriginalRunners()
SPARES = SpareRunners()
atexit.register(SPARES.close_all)
atexit.register(ORIGINALS.close_all)
atexit.register(wait_for_closes)  # atexit runs last-registered first: closes end before originals go

