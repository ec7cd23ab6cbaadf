"""The anti-cheat checks of a candidate call, as objects in the order the runner makes them.

Each `Check` has a name, says what it looks at and gives its own rejection reason; `find`
returns what it found (the message, without the case label) or None. The correctness runner
makes `SANDBOX_VIOLATION` first (also when the call raised), then `AT_RETURN` the moment the
call returned, and `ON_RESULT` once the reference of the same step has run. The first check
that finds something rejects the candidate. A runner's rejection is a second wall: the judge
decides correctness from the output files alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelband.evaluate import integrity
from kernelband.evaluate.compare import aliased_indices, mutated_indices
from kernelband.runner.host_work import HostWork, host_work_problem
from kernelband.runner.observe import changed_after_return, live_threads
from kernelband.runner.torch_work import TORCH_WORK_SLACK, allowance
from kernelband.sandbox import guard

# Torch work plus host exports in a candidate's region functions (outside its Triton launches)
# of at least this many elements per input element, and more than the original's own torch work
# (plus TORCH_WORK_SLACK), computed the result outside its kernel. An epilogue on the output (a
# bias add after a Triton matmul) reads less and passes.
SHARE_LIMIT = 1.0


def _no_original_work() -> int:
    return 0


@dataclass
class CandidateCall:
    """What one candidate call left for the checks to look at."""

    where: str  # the case label every message starts with
    args: list[Any]
    out: Any = None
    before: Any = None  # a snapshot of `args` before the call
    early: Any = None  # the result as it was at return
    launches: list[Any] = field(default_factory=list)  # captured Triton launches
    threads: set[int] = field(default_factory=set)  # Python threads alive before the call
    seal: integrity.TimerSeal | None = None  # taken before the candidate's module code ran
    host: Any = None  # HostWork of the call, when it was watched
    work: Any = None  # TorchWork of the call's region functions, when it was watched
    count_launches: bool = True
    cached: bool = False  # a TritonBench result served from an earlier run of the same test
    inplace: tuple[int, ...] = ()  # the problem's INPLACE_OUTPUTS
    original_work: Callable[[], int] = _no_original_work  # the original's torch work, same case


@dataclass(frozen=True)
class Check:
    """One anti-cheat check: its name, what it looks at, the reason it rejects with, how it
    finds it."""

    name: str
    reason: str
    checks: str
    find: Callable[[CandidateCall], str | None]


def _sandbox(call: CandidateCall) -> str | None:
    return str(guard.VIOLATIONS[0]) if guard.VIOLATIONS else None


def _thread(call: CandidateCall) -> str | None:
    if not live_threads() - call.threads:
        return None
    return ("the candidate left a thread running after it returned; compute the whole result "
            "before returning, on the calling thread")


def _timer(call: CandidateCall) -> str | None:
    if call.seal is None or not (broken := call.seal.broken()):
        return None
    return f"the candidate replaced {broken}; a kernel must not touch timers, events or statistics functions"


def _side_stream(call: CandidateCall) -> str | None:
    if not call.launches or not (side := integrity.launch_streams(call.launches, integrity.current_stream())):
        return None
    return (f"the candidate launched {sorted(set(side))} on a stream other than the current one; "
            "the timer sees only the current stream, so launch every kernel there")


def _no_launch(call: CandidateCall) -> str | None:
    if not call.count_launches or call.launches or call.cached:
        return None
    return ("the candidate launched no Triton kernel (computing the result with torch alone is not "
            "an optimized kernel)")


def _host_compute(call: CandidateCall) -> str | None:
    if not call.count_launches or call.work is None or call.cached or not isinstance(call.host, HostWork):
        return None
    return host_work_problem(call.host, int(call.work.elements), int(call.work.input_elements(call.args)),
                             SHARE_LIMIT)


def _torch_compute(call: CandidateCall) -> str | None:
    work = call.work
    if work is None or getattr(work, "cached", False):
        return None
    inputs = work.input_elements(call.args)
    if work.elements < SHARE_LIMIT * max(inputs, 1):
        return None
    original = call.original_work()
    if work.elements <= allowance(original):
        return None
    return (f"the candidate computed with torch outside its Triton kernels ({work.top()}: "
            f"{work.elements} elements read in region functions, against the original's {original} "
            f"(+{TORCH_WORK_SLACK:.0%}) and {inputs} input elements); keep the computation in the "
            "Triton kernels")


def _not_plain(call: CandidateCall) -> str | None:
    return integrity.output_problem(call.out)


def _changed(call: CandidateCall) -> str | None:
    if not changed_after_return(call.early, call.out):
        return None
    return ("the result changed after the candidate returned (work left running on another thread "
            "or stream); finish all work before returning")


def _aliased(call: CandidateCall) -> str | None:
    if not (aliased := aliased_indices(call.out, call.args, call.inplace)):
        return None
    return f"the output shares memory with input argument(s) {aliased}; return a new tensor"


def _mutated(call: CandidateCall) -> str | None:
    if not (mutated := mutated_indices(call.before, call.args, call.inplace)):
        return None
    return (f"the candidate modified input argument(s) {mutated} (declare INPLACE_OUTPUTS if the "
            "kernel writes them on purpose)")


SANDBOX_VIOLATION = Check("sandbox", "sandbox_violation",
                          "the sandbox's audit guard saw no forbidden operation", _sandbox)
AT_RETURN: tuple[Check, ...] = (
    Check("threads", "background_thread", "no thread the call started is still running", _thread),
    Check("timers", "timer_tampered", "timers, CUDA events and statistics functions are the ones "
          "sealed before the candidate loaded", _timer),
    Check("streams", "side_stream_launch", "every Triton launch ran on the current stream", _side_stream),
    Check("triton launch", "decoy_no_triton_launch", "the call launched at least one Triton kernel",
          _no_launch),
    Check("host work", "decoy_host_compute", "input data exported to the host plus torch work stay "
          "under SHARE_LIMIT per input element", _host_compute),
)
ON_RESULT: tuple[Check, ...] = (
    Check("torch work", "decoy_torch_compute", "torch work in region functions stays under "
          "SHARE_LIMIT per input element or within the original's own", _torch_compute),
    Check("plain output", "output_not_plain_tensor", "the result holds plain, materialised dense "
          "tensors", _not_plain),
    Check("result at return", "output_changed_after_return", "the result is bit for bit what it was "
          "at return, once every stream finished", _changed),
    Check("aliasing", "output_aliases_input", "the result shares no memory with the inputs", _aliased),
    Check("input mutation", "input_mutated", "the inputs are unchanged, INPLACE_OUTPUTS excepted",
          _mutated),
)
CHECKS: tuple[Check, ...] = (SANDBOX_VIOLATION, *AT_RETURN, *ON_RESULT)


def first_failure(checks: tuple[Check, ...], call: CandidateCall) -> tuple[Check, str] | None:
    """The first of `checks` that finds something in `call`, with what it found."""
    for check in checks:
        if (found := check.find(call)) is not None:
            return check, found
    return None
