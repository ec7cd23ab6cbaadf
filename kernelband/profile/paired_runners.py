"""Live runners of paired timing: how one starts with a problem loaded, and the warm originals.

A GPU worker keeps the original's runner of the last problems it measured (`ORIGINALS`): the
original's module stays imported and compiled between candidates. Its times are not reused: a
speedup is paired, so the original is timed again beside every candidate.
"""

from __future__ import annotations

import atexit
import hashlib
import json
from dataclasses import dataclass, replace

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.sandbox.limits import SandboxLimits, SandboxResult
from kernelband.sandbox.session import RunnerSession, SessionError

RUNNER_TARGET = "kernelband.runner.timing:serve_task"
# a TritonBench-G harness draws its inputs when it loads: every runner draws them from this seed
HARNESS_SEED = 0


@dataclass(frozen=True)
class PairedConfig:
    """How a paired measurement runs. `cores`: the measuring core set (empty: no pinning)."""

    rounds: int = 20
    batch_ms: float = 5.0
    max_batch: int = 2000
    calibration_batches: int = 3
    verify_fraction: float = 0.25
    pause_idle: bool = True
    graphs: bool = False
    cores: tuple[int, ...] = ()
    command_timeout_s: float = 120.0
    load_timeout_s: float = 600.0
    seed: int | None = None  # the judge's draws (input seeds, checked rounds); None: fresh
    # "wall": the judge's perf_counter around each batch (GPU). "cpu": the CPU time the OS
    # charged to the runner's processes during the batch, read by the judge from /proc (the
    # interpreter on a shared host, where wall time measures the host's load, not the calls)
    clock: str = "wall"

    def __post_init__(self) -> None:
        if self.clock not in ("wall", "cpu"):
            raise ValueError(f"clock must be 'wall' or 'cpu', not {self.clock!r}")
        if self.rounds < 3:
            raise ValueError(f"rounds={self.rounds}: a paired interval needs at least 3 rounds")

    @property
    def how(self) -> str:
        calls = "CUDA graph replays" if self.graphs else "launches"
        clock = "judge clock" if self.clock == "wall" else "runner CPU time read by the judge from /proc"
        return f"{clock} around batches of {calls}, ABBA rounds, two runners"


@dataclass
class Runner:
    """A live runner session with a problem loaded: the cases it times, whether outputs are checked."""

    session: RunnerSession
    cases: list[str]
    verifiable: bool

    @property
    def closed(self) -> bool:
        return self.session.closed is not None

    def close(self) -> SandboxResult:
        return self.session.close()


def start_runner(problem: KernelProblem, editable: str | None, device: str, config: PairedConfig,
                 limits: SandboxLimits | None) -> Runner:
    """A runner session with `editable` loaded; a candidate that cannot load is rejected."""
    limits = limits or SandboxLimits.from_settings()
    limits = replace(limits, interpret=not device.startswith("cuda"), compile_s=0.0,
                     wall_s=max(limits.wall_s, config.load_timeout_s))
    session = RunnerSession(RUNNER_TARGET, {"cores": list(config.cores) or None}, limits)
    try:
        reply = session.request({"cmd": "load", "problem": problem.to_dict(), "editable": editable,
                                 "device": device, "graphs": config.graphs, "seed": HARNESS_SEED},
                                config.load_timeout_s).value
    except SessionError as exc:
        session.close()
        raise TimingRejected(f"runner_{exc.reason}", f"the runner failed to load: {exc}") from exc
    if not reply.get("ok"):
        session.close()
        raise TimingRejected("runner_load_failed", f"the runner could not load the kernel: {reply.get('error')}")
    return Runner(session, [str(c) for c in reply["cases"]], bool(reply.get("verifiable")))


class OriginalRunners:
    """Warm runners of originals, one per (problem, device, timing mode), reused by candidates.

    Each keeps the original's compiled module loaded; its inputs are rebuilt per round (fresh
    seeds), and its baseline is re-timed beside every candidate, since a speedup is paired."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self.sessions: dict[str, Runner] = {}

    @staticmethod
    def key(problem: KernelProblem, device: str, config: PairedConfig) -> str:
        text = json.dumps([problem.to_dict(), device, config.graphs, list(config.cores)], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, problem: KernelProblem, device: str, config: PairedConfig,
            limits: SandboxLimits | None) -> Runner:
        key = self.key(problem, device, config)
        session = self.sessions.get(key)
        if session is not None and not session.closed:
            return session
        while len(self.sessions) >= self.size:
            self.sessions.pop(next(iter(self.sessions))).close()
        session = start_runner(problem, None, device, config, limits)
        self.sessions[key] = session
        return session

    def drop(self, problem: KernelProblem, device: str, config: PairedConfig) -> None:
        session = self.sessions.pop(self.key(problem, device, config), None)
        if session is not None:
            session.close()

    def close_all(self) -> None:
        while self.sessions:
            self.sessions.popitem()[1].close()


ORIGINALS = OriginalRunners()
atexit.register(ORIGINALS.close_all)

