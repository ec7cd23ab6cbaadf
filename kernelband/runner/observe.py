"""The hooks the correctness runner (`kernelband.runner.correctness`) calls for its in-process checks.

One place for them keeps the checks readable: host-side work, timer integrity, side-stream
launches, plain-tensor outputs and scrubbing the reference's memory.
"""

from __future__ import annotations

import threading
from typing import Any

from kernelband.evaluate import integrity
from kernelband.evaluate.compare import bitwise_equal, tensors
from kernelband.evaluate.host_work import HostWork, host_work_problem
from kernelband.evaluate.integrity import (
    TimerSeal,
    launch_streams,
    output_problem,
    snapshot_out,
    synchronize,
)

__all__ = ["TimerSeal", "after_candidate_call", "live_threads", "changed_after_return", "early_copy", "host_work",
           "host_work_problem", "output_problem", "scrub_reference"]

# Must match kernelband.runner.correctness.TORCH_SHARE_LIMIT: host exports weigh like torch work.
HOST_SHARE_LIMIT = 1.0


def host_work(args: list[Any], runtime: Any = None) -> HostWork:
    """A host-export counter (a torch function mode) for one candidate call on `args`; a
    KernelBench model's weights count as inputs too."""
    return HostWork([args, *_model_state(runtime)])


def _model_state(runtime: Any) -> list[Any]:
    state: list[Any] = []
    for pair in getattr(runtime, "_models", {}).values():  # KernelBench: Model and ModelNew
        for module in pair:
            state += [list(module.parameters()), list(module.buffers())]
    return state


# Worker threads of thread pools (what a library starts to compile in parallel) are not the
# kernel's; a thread running any other function, torch's included, is.
LIBRARY_THREAD_MODULES = ("concurrent.futures", "threading")


def _library_thread(thread: Any) -> bool:
    target = getattr(thread, "_target", None) or type(thread).run
    module = str(getattr(target, "__module__", "") or "")
    return type(thread).run is threading.Thread.run and module.startswith(LIBRARY_THREAD_MODULES)


def live_threads() -> set[int]:
    """Identifiers of the Python threads alive now, thread-pool workers excepted."""
    return {t.ident for t in threading.enumerate() if t.ident is not None and not _library_thread(t)}


def after_candidate_call(seal: TimerSeal | None, records: list[Any],
                         threads_before: set[int] | None = None) -> tuple[str, str] | None:
    """`(reason, message)` when a candidate call replaced a timer, left a thread running or
    launched on a side stream."""
    if threads_before is not None and (live_threads() - threads_before):
        return ("background_thread", "the candidate left a thread running after it returned; "
                "compute the whole result before returning, on the calling thread")
    if seal is not None and (broken := seal.broken()):
        return ("timer_tampered", f"the candidate replaced {broken}; a kernel must not touch "
                "timers, events or statistics functions")
    if records and (side := launch_streams(records, integrity.current_stream())):
        return ("side_stream_launch", f"the candidate launched {sorted(set(side))} on a stream "
                "other than the current one; the timer sees only the current stream, so launch "
                "every kernel there")
    return None


def host_work_problem_for(host: Any, work: Any, args: list[Any]) -> tuple[str, str] | None:
    """The host-work verdict of one watched call (`work` is its TorchWork)."""
    if not isinstance(host, HostWork):
        return None
    return host_work_problem(host, int(work.elements), int(work.input_elements(args)), HOST_SHARE_LIMIT)


def early_copy(out: Any) -> Any:
    """A copy of a result taken the moment the call returned (nothing synchronised first)."""
    return snapshot_out(out)


def changed_after_return(early: Any, out: Any) -> bool:
    """True when a result differs from its copy at return, once every stream has finished."""
    if output_problem(out) or not any(True for _ in tensors(out)):
        return False  # not plain (reported as such) or no tensors: nothing runs after return
    synchronize()
    return not bitwise_equal(early, out)


def scrub_reference(out: Any, ref_args: list[Any], runtime: Any) -> Any:
    """`integrity.stash_and_scrub` of a reference result, sparing its inputs and model state.

    A TritonBench test's results may share memory with the test module's own state (buffers
    kept between calls, later cases of the same run): those are copied but not overwritten;
    `scrub_released` overwrites their memory once the checker lets go of them."""
    if hasattr(runtime, "share_runs"):
        return integrity.stash(out)
    return integrity.stash_and_scrub(out, [ref_args, *_model_state(runtime)])


def scrub_released() -> None:
    """Overwrite the GPU memory that reference results released (no-op without CUDA)."""
    integrity.scrub_free_memory()
