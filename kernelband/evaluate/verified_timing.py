"""Verified timing: the calls that are timed are also checked against the reference.

A candidate that is honest while it is checked and cheap while it is timed (call counting), or
that returns a result cached by tensor identity, address or a cheap fingerprint, gains nothing
here: every timed call runs on a copy of one of several buffer sets (distinct seeds, distinct
allocations) whose contents change a little before each call (a few elements of every floating
input are overwritten with other elements of the same row), and a random share of the calls,
always including the last, is compared with the reference afterwards. A set's copy is sometimes
a fresh allocation and sometimes the allocation its previous call ran on, refilled in place (as
a benchmark loop reuses its buffers): the second call on a set always reuses it, so a result
cached by address is served, and caught, whenever a set comes round again. The reference runs
after the candidate's call, outside the timed region, so the candidate cannot read its result.

`VerifiedRuns.prepare` is a `Prepare` for `kernelband.profile.timing.measure`; call `finish()`
after the measurement. A disagreement raises `TimingRejected` with its own reason
(`timing_output_mismatch:call=N`, `timing_output_changed_after_return:call=N`, ...).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelband.evaluate import integrity
from kernelband.evaluate.compare import bitwise_equal, compare_results, mutated_indices, tensors
from kernelband.problem.model import Case, CaseInputs, KernelProblem
from kernelband.profile.launches import capture_launches


class TimingRejected(Exception):
    """A timed call disagreed with the reference (or broke a rule); `reason` names it."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class VerifyConfig:
    """How timed calls are fed and checked. `strict`: every call is checked."""

    buffer_sets: int = 3  # input sets the calls rotate over (distinct seeds and addresses)
    verify_fraction: float = 0.25  # share of calls checked at random; the last call always is
    salt_elements: int = 8  # elements of each floating input overwritten before every call
    reuse_fraction: float = 0.5  # share of later calls on a set refilling its last allocation
    # untimed probe calls slipped in at random: their launches are captured (the stream each
    # ran on) and their result checked; the candidate cannot tell them from timed calls
    probe_fraction: float = 0.1
    strict: bool = False

    @property
    def fraction(self) -> float:
        return 1.0 if self.strict else self.verify_fraction


STRICT = VerifyConfig(buffer_sets=4, probe_fraction=0.25, strict=True)


@dataclass
class _Call:
    """One timed call: the buffer set it read, the copy it ran on, what it returned."""

    index: int
    source: list[Any]
    args: list[Any]
    out: Any = None
    ran: bool = False


@torch.no_grad()
def _refill(slot: list[Any], source: list[Any]) -> list[Any] | None:
    """`slot` (an earlier copy of `source`) given `source`'s current values in place; None when
    a tensor of the slot no longer matches its source (a call resized or re-typed it)."""
    pairs = [(dst, src) for dst, src in zip(slot, source, strict=True)
             if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor)]
    if any((dst.shape, dst.dtype, dst.device) != (src.shape, src.dtype, src.device)
           for dst, src in pairs):
        return None
    for dst, src in pairs:
        dst.copy_(src)
    return slot


def _clone_args(args: list[Any]) -> list[Any]:
    copies = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    if isinstance(args, CaseInputs):
        return CaseInputs(copies, args.case, args.seed)
    return copies


@torch.no_grad()
def salt(args: list[Any], count: int, rng: random.Random) -> None:
    """Overwrite `count` elements of every floating tensor with others of the same last-dim row.

    Values stay those the inputs already hold (same range and sign), so a kernel that is right on
    the original inputs is right on the salted ones; a result cached from an earlier call is not.
    """
    for t in args:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() < 2:
            continue
        rows = t.shape[:-1]
        width = t.shape[-1]
        try:
            for _ in range(count):
                row = tuple(rng.randrange(n) for n in rows)
                dst, src = rng.randrange(width), rng.randrange(width)
                t[(*row, dst)] = t[(*row, src)]
        except RuntimeError:
            continue  # e.g. an expanded tensor (elements share memory): left as it is


class VerifiedRuns:
    """A factory of timed runs of one case whose outputs are checked (see the module doc)."""

    def __init__(self, runtime: Any, problem: KernelProblem, case: Case, config: VerifyConfig | None = None,
                 rng: random.Random | None = None, who: str = "candidate", *,
                 seal: integrity.TimerSeal | None = None, lenient: bool = False) -> None:
        """`seal`: taken before the candidate was loaded (default: now). `lenient`: a failed
        check is recorded in `failure`, not raised (for a parent that is timed alongside)."""
        self.runtime, self.problem, self.case = runtime, problem, case
        self.config = config or VerifyConfig()
        self.rng = rng or random.Random(random.SystemRandom().randrange(1 << 30))
        self.call = getattr(runtime, who)
        self.sets = [runtime.inputs(case, self._seed()) for _ in range(max(1, self.config.buffer_sets))]
        self.slots: dict[int, tuple[list[Any], int]] = {}  # set -> (its last copy, times it ran)
        self.pending: _Call | None = None
        self.calls = self.verified = 0
        self.verify_s = 0.0  # wall seconds spent checking (outside the timed region)
        self.output_bytes = 0  # bytes the last call's result spans (for the physical floor)
        self.seal = seal or integrity.TimerSeal()
        self.lenient, self.failure = lenient, ""
        integrity.reset_l2_persistence()

    def _seed(self) -> int:
        return self.rng.randrange(1, 1 << 30)

    def _next_call(self) -> _Call:
        """The next call: a salted buffer set and the copy it runs on (see the module doc)."""
        k = self.rng.randrange(len(self.sets))
        if not list(tensors(self.sets[k])):  # inputs built inside the call: a fresh seed each time
            self.sets[k] = self.runtime.inputs(self.case, self._seed())
        source = self.sets[k]
        salt(source, self.config.salt_elements, self.rng)
        slot, runs = self.slots.get(k, (None, 0))
        reuse = slot is not None and (runs == 1 or self.rng.random() < self.config.reuse_fraction)
        args = (_refill(slot, source) if reuse and slot is not None else None) or _clone_args(source)
        self.slots[k] = (args, runs + 1)
        call = _Call(self.calls, source, args)
        self.calls += 1
        return call

    def prepare(self) -> Callable[[], Any]:
        """Settle the previous call, then bind the next call to a fresh, salted copy."""
        self._settle(last=False)
        if self.rng.random() < self.config.probe_fraction:
            self._probe()
        call = self.pending = self._next_call()

        def run() -> Any:
            call.out = self.call(call.args)
            call.ran = True
            return call.out

        return run

    def _probe(self) -> None:
        """One untimed call with its launches captured: on a side stream it is refused."""
        call = self._next_call()
        timed_stream = integrity.current_stream()
        with capture_launches() as records:
            call.out = self.call(call.args)
        call.ran = True
        if side := integrity.launch_streams(records, timed_stream):
            if not self.lenient:
                raise TimingRejected(f"timing_side_stream_launch:call={call.index}", f"call={call.index} "
                                     f"launched {sorted(set(side))} on a stream other than the timed one")
            self.failure = self.failure or "timing_side_stream_launch"
        self.pending = call
        self._settle(last=True)

    def finish(self) -> dict[str, Any]:
        """Check the last call (always) and the timer functions; a summary for the result."""
        self._settle(last=True)
        if (broken := self.seal.broken()) and not self.lenient:
            raise TimingRejected("timer_tampered", f"{broken} was replaced during the timed runs; "
                                 "a kernel must not touch timers or statistics")
        return {"calls": self.calls, "verified_calls": self.verified, "verify_s": round(self.verify_s, 4),
                "buffer_sets": len(self.sets), "strict": self.config.strict, "failure": self.failure}

    def _settle(self, last: bool) -> None:
        call, self.pending = self.pending, None
        if call is None or not call.ran:
            return
        start = time.perf_counter()
        # a copy taken now, before any synchronisation: work still running on another stream
        # or thread after the call returned shows up as a difference with the final output
        early = integrity.snapshot_out(call.out)
        self.output_bytes = _result_bytes(call.out) + sum(
            _result_bytes(call.args[i]) for i in self.problem.inplace_outputs if i < len(call.args))
        if last or self.rng.random() < self.config.fraction:
            self.verified += 1
            try:
                self._verify(call, early)
            except TimingRejected as rej:
                if not self.lenient:
                    raise
                self.failure = self.failure or rej.reason
        self.verify_s += time.perf_counter() - start

    def _verify(self, call: _Call, early: Any) -> None:
        integrity.synchronize()
        where = f"call={call.index}"
        if broken := self.seal.broken():
            raise TimingRejected("timer_tampered", f"{where}: {broken} was replaced during the timed "
                                 "runs; a kernel must not touch timers or statistics")
        if plain := integrity.output_problem(call.out):
            raise TimingRejected(f"timing_output_not_plain:{where}", f"timed {where}: {plain}")
        ref_args = _clone_args(call.source)
        expected = self._outputs(self.runtime.reference(ref_args), ref_args)
        actual = self._outputs(call.out, call.args)
        integrity.synchronize()  # the reference ran meanwhile: late work has had time to land
        if not bitwise_equal(early, call.out):
            raise TimingRejected(f"timing_output_changed_after_return:{where}", f"timed {where}: the "
                                 "output changed after the call returned (work left running on another "
                                 "stream or thread); finish all work before returning")
        if found := compare_results(expected, actual, self.problem.tolerance):
            raise TimingRejected(f"timing_output_mismatch:{where}", f"timed {where} returned a wrong "
                                 f"result ({found.reason} at {found.where}: {found.detail}); the "
                                 "result of every timed call must be right")
        if mutated := mutated_indices(call.source, call.args, self.problem.inplace_outputs):
            raise TimingRejected(f"timing_input_mutated:{where}", f"timed {where} modified input "
                                 f"argument(s) {mutated}")

    def _outputs(self, out: Any, args: list[Any]) -> Any:
        inplace = self.problem.inplace_outputs
        return (out, [args[i] for i in inplace]) if inplace else out



def output_fingerprint(value: Any) -> float:
    """Sum of squares of every element of a result (float32 products, one read of each tensor).

    A timing runner reports it with each batch, inside the timed window (one pass over the
    output per batch, not per call); the judge recomputes it from the output it later asks
    for, so a runner cannot commit to one result and hand over another."""
    total = 0.0
    for t in tensors(value):
        flat = (torch.view_as_real(t) if t.is_complex() else t).detach().reshape(-1)
        if flat.numel():
            flat = flat if flat.dtype == torch.float32 else flat.to(torch.float32)
            total += float(torch.dot(flat, flat))
    return total


def same_fingerprint(committed: Any, recomputed: float) -> bool:
    """Whether a reported fingerprint is the recomputed one (device and host sum in different
    orders; NaN and Inf outputs give equal non-finite fingerprints)."""
    if not isinstance(committed, float):
        return False
    if math.isnan(committed) or math.isnan(recomputed):
        return math.isnan(committed) and math.isnan(recomputed)
    return math.isclose(committed, recomputed, rel_tol=1e-3, abs_tol=1e-6)


def _result_bytes(value: Any) -> int:
    """Bytes a result's tensors span (a broadcast view counts its storage, not its shape)."""
    total = 0
    for t in tensors(value):
        if type(t) is torch.Tensor and t.device.type != "meta":
            total += min(int(t.numel()) * t.element_size(), int(t.untyped_storage().nbytes()))
    return total
