"""The judge's commands to the two runners of one paired measurement.

Timed batches go to one runner at a time, the other paused (`RunnerPair.ask`). Preparing
inputs is untimed, so both runners prepare at once (`RunnerPair.prepare`): every command is
sent to both before any reply is read, and a round's fresh inputs cost the exclusive GPU turn
the slower runner's time instead of the sum of both. The original's runner autotunes nothing
there (it takes the problem's picks, `paired_autotune`); a kernel the candidate changed may
autotune beside the original's prepare, which can only make the candidate's own pick worse.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from typing import Any

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.profile.paired_runners import PairedConfig, Runner, runner_error
from kernelband.sandbox.session import CLOCK_TICKS, SessionError

FORGED_SLACK_MS = 0.05  # the runner's clock starts after ours; more than this is not jitter
# A small kernel's time depends on where its data lies (which L2 partition, which DRAM channels):
# two runners of identical code measured 3% apart on an H200 for a whole run. Fresh inputs
# behind a random pad every round make placement part of the round-to-round variation, which
# the interval then covers, instead of a fixed offset between the two processes.
PAD_MAX_BYTES = 8 * 1024 * 1024
PAD_STEP_BYTES = 512  # the CUDA caching allocator's granularity


class RunnerPair:
    """The two runners of one measurement and the judge's commands to them."""

    def __init__(self, original: Runner, candidate: Runner, config: PairedConfig) -> None:
        self.runners = {"original": original, "candidate": candidate}
        self.config = config
        self.committed: dict[str, Any] = {}  # role -> the fingerprint its last batch reported
        self.claimed_ms = {role: 0.0 for role in self.runners}
        self.judged_ms = {role: 0.0 for role in self.runners}
        # per batch, what the runner's CUDA events said (ms per call): diagnostics only
        self.claimed_gpu_ms: dict[str, list[float]] = {role: [] for role in self.runners}

    def ask(self, role: str, command: dict[str, Any], timeout_s: float | None = None) -> tuple[dict[str, Any], float]:
        """Send `command` to one runner (the other paused); (reply, judge wall ms)."""
        other = self.runners["candidate" if role == "original" else "original"]
        if self.config.pause_idle:
            other.session.pause()
        return self.exchange([(role, command)], timeout_s)[0]

    def exchange(self, commands: Sequence[tuple[str, dict[str, Any]]],
                 timeout_s: float | None = None) -> list[tuple[dict[str, Any], float]]:
        """Send every (role, command), then read the replies in the same order: the runners work
        on theirs at the same time. (reply, judge wall ms from sending to reading) each; the
        first refusal raises, once every reply is read (a runner's answers stay in step)."""
        timeout_s = timeout_s or self.config.command_timeout_s
        sent: list[float] = []
        replies: list[tuple[dict[str, Any], float]] = []
        role = ""
        try:
            for role, command in commands:
                sent.append(self.runners[role].session.send(command))
            for (role, command), at in zip(commands, sent, strict=True):
                reply = self.runners[role].session.receive(command, at, timeout_s)
                replies.append((reply.value, reply.wall_s * 1e3))
        except SessionError as exc:
            self._drain(commands[len(replies):len(sent)], sent[len(replies):], timeout_s)
            raise runner_error(role, f"runner_{exc.reason}", f"the {role}'s runner failed: {exc}") from exc
        for (role, command), (value, _) in zip(commands, replies, strict=True):
            if not value.get("ok"):
                raise runner_error(role, "runner_error", f"the {role}'s runner refused {command['cmd']}: "
                                   f"{value.get('error')}")
        return replies

    def _drain(self, commands: Sequence[tuple[str, dict[str, Any]]], sent: Sequence[float],
               timeout_s: float) -> None:
        """Read the replies still owed by runners that are alive, so that a runner kept for the
        next measurement (the original's) answers its next command, not this one."""
        for (role, command), at in zip(commands, sent, strict=False):
            session = self.runners[role].session
            if session.closed is None:
                with contextlib.suppress(SessionError):
                    session.receive(command, at, timeout_s)

    def batch(self, role: str, case: str, k: int, salt: int | None = None) -> float:
        """One timed batch; the judge's ms per call. Cross-checks the runner's own figure."""
        session = self.runners[role].session
        cpu_before = session.cpu_seconds() if self.config.clock == "cpu" else 0.0
        reply, wall_ms = self.ask(role, {"cmd": "run_batch", "case": case, "k": k, "salt": salt})
        cpu_ms = (session.cpu_seconds() - cpu_before) * 1e3 if self.config.clock == "cpu" else 0.0
        self.committed[role] = reply.get("fingerprint")
        claimed = reply.get("runner_ms")
        if role == "candidate" and (not isinstance(claimed, int | float) or not math.isfinite(claimed)
                                    or claimed > wall_ms + FORGED_SLACK_MS):
            raise TimingRejected("timing_forged", f"the candidate's runner reported {claimed!r} ms for a batch "
                                 f"the judge timed at {wall_ms:.3f} ms; its figures are not believable")
        if isinstance(claimed, int | float):
            self.claimed_ms[role] += float(claimed)
        gpu = reply.get("runner_gpu_ms")
        if isinstance(gpu, int | float) and math.isfinite(gpu):
            self.claimed_gpu_ms[role].append(float(gpu) / k)
        self.judged_ms[role] += wall_ms
        if self.config.clock == "cpu":  # clock ticks: a batch charged nothing took under one
            return max(cpu_ms, 1e3 / CLOCK_TICKS / 2) / k
        return wall_ms / k

    def prepare(self, cases: Sequence[str], seed: int, rng: random.Random | None = None) -> None:
        """Inputs for `seed` in both runners, both working at once (nothing is timed); with
        `rng`, each runner first sets aside a random amount of device memory of its own, so its
        inputs land at other addresses this round."""
        commands = []
        for role in self.runners:
            for case in cases:
                pad = rng.randrange(PAD_MAX_BYTES // PAD_STEP_BYTES) * PAD_STEP_BYTES if rng else 0
                commands.append((role, {"cmd": "prepare", "case": case, "seed": seed, "pad": pad}))
        self.exchange(commands, self.config.load_timeout_s)

    def pause_both(self) -> None:
        for runner in self.runners.values():
            runner.session.pause()
