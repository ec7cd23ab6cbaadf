"""The hooks the correctness checks (`kernelband.evaluate.checks`) call for evaluator hardening.

One place for them keeps the checks readable: host-side work, timer integrity, side-stream
launches, plain-tensor outputs and scrubbing the reference's memory.
"""

from __future__ import annotations

from typing import Any

from kernelband.evaluate.host_work import HostWork, host_work_problem
from kernelband.evaluate.integrity import TimerSeal, launch_streams, output_problem, stash_and_scrub

__all__ = ["TimerSeal", "after_candidate_call", "host_work", "host_work_problem", "output_problem",
           "stash_and_scrub"]

# Must match kernelband.evaluate.checks.TORCH_SHARE_LIMIT: host exports weigh like torch work.
HOST_SHARE_LIMIT = 1.0


def host_work() -> HostWork:
    """A fresh host-export counter (a torch function mode) for one candidate call."""
    return HostWork()


def after_candidate_call(seal: TimerSeal | None, records: list[Any]) -> tuple[str, str] | None:
    """`(reason, message)` when a candidate call replaced a timer or launched on a side stream."""
    if seal is not None and (broken := seal.broken()):
        return ("timer_tampered", f"the candidate replaced {broken}; a kernel must not touch "
                "timers, events or statistics functions")
    if records and (side := launch_streams(records, _current_stream())):
        return ("side_stream_launch", f"the candidate launched {sorted(set(side))} on a stream "
                "other than the current one; the timer sees only the current stream, so launch "
                "every kernel there")
    return None


def host_work_problem_for(host: Any, work: Any, args: list[Any]) -> tuple[str, str] | None:
    """The host-work verdict of one watched call (`work` is its TorchWork)."""
    if not isinstance(host, HostWork):
        return None
    return host_work_problem(host, int(work.elements), int(work.input_elements(args)), HOST_SHARE_LIMIT)


def _current_stream() -> int | None:
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return int(torch.cuda.current_stream().cuda_stream)
