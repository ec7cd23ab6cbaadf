"""What the correctness runner watches around a call: threads, host exports, the result at return,
and the reference's memory scrubbed before the candidate runs.

The checks that decide on these observations are `kernelband.runner.checks`.
"""

from __future__ import annotations

import threading
from typing import Any

from kernelband.evaluate import integrity
from kernelband.evaluate.compare import bitwise_equal, tensors
from kernelband.evaluate.integrity import output_problem, snapshot_out, synchronize
from kernelband.runner.host_work import HostWork


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
    `scrub_released` overwrites their memory once the runner lets go of them."""
    if hasattr(runtime, "share_runs"):
        return integrity.stash(out)
    return integrity.stash_and_scrub(out, [ref_args, *_model_state(runtime)])


def scrub_released() -> None:
    """Overwrite the GPU memory that reference results released (no-op without CUDA)."""
    integrity.scrub_free_memory()
