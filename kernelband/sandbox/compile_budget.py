"""Compilation time budgeted apart from run time, inside a sandbox child.

A kernel with many `@triton.autotune` configs spends its first call compiling and timing every
config; on a GPU that can take minutes while the kernel itself runs in microseconds. With
`SandboxLimits.compile_s > 0`, time spent in Triton's compiler and in autotuning counts against
`compile_s` and everything else against `wall_s`; the supervisor's hard deadline is their sum.
Exceeding either raises (from a timer signal, in the main thread) an exception that user code's
`except Exception` cannot swallow; the child reports it as `timeout` or `compile_timeout`.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

CHECK_INTERVAL_S = 0.25


class BudgetExceeded(BaseException):  # noqa: N818 - a BaseException, like KeyboardInterrupt
    """A sandbox budget ran out; `sandbox_reason` is the result's reason."""

    sandbox_reason = "timeout"


class RunBudgetExceeded(BudgetExceeded):
    sandbox_reason = "timeout"


class CompileBudgetExceeded(BudgetExceeded):
    sandbox_reason = "compile_timeout"


class CompileClock:
    """Seconds spent compiling and autotuning (nested calls counted once)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.entered = 0.0
        # compiles may run on several threads at once (kernelband.problem.autotune_compile):
        # the clock counts the time any of them is compiling, once
        self._depths: dict[int, int] = {}  # thread ident -> nesting depth
        self._released: dict[int, int] = {}  # depths of compiles that no longer count
        self._lock = threading.RLock()  # re-entrant: the budget's signal handler reads it

    @property
    def depth(self) -> int:
        """Compile calls in progress, over all counted threads."""
        with self._lock:
            return sum(self._depths.values())

    def now_spent(self) -> float:
        with self._lock:
            running = time.monotonic() - self.entered if self._depths else 0.0
            return self.spent + running

    def release(self, threads: set[int]) -> None:
        """Stop counting what `threads` compile now (a compile abandoned to run on unwaited
        in the background, see kernelband.problem.autotune_compile); a later compile of the
        same thread counts again."""
        with self._lock:
            counted = bool(self._depths)
            for ident in threads:
                depth = self._depths.pop(ident, 0)
                if depth:
                    self._released[ident] = depth
            if counted and not self._depths:
                self.spent += time.monotonic() - self.entered

    def _enter(self) -> None:
        ident = threading.get_ident()
        with self._lock:
            if ident in self._released:  # a nested call inside the abandoned compile
                self._released[ident] += 1
                return
            if not self._depths:
                self.entered = time.monotonic()
            self._depths[ident] = self._depths.get(ident, 0) + 1

    def _leave(self) -> None:
        ident = threading.get_ident()
        with self._lock:
            if ident in self._released:
                self._released[ident] -= 1
                if not self._released[ident]:
                    del self._released[ident]  # the abandoned compile ended
                return
            self._depths[ident] -= 1
            if not self._depths[ident]:
                del self._depths[ident]
                if not self._depths:
                    self.spent += time.monotonic() - self.entered

    def timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self._enter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._leave()

        wrapper.__kb_timed__ = True  # type: ignore[attr-defined]
        return wrapper


CLOCK = CompileClock()


def _wrap(owner: Any, name: str) -> None:
    fn = getattr(owner, name, None)
    if fn is not None and not getattr(fn, "__kb_timed__", False):
        setattr(owner, name, CLOCK.timed(fn))


def instrument_triton() -> None:
    """Count Triton's compiler and the autotuner's config timing on CLOCK."""
    try:
        import triton.compiler
        import triton.compiler.compiler
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # no triton: nothing compiles
        return
    _wrap(triton.compiler, "compile")
    _wrap(triton.compiler.compiler, "compile")
    _wrap(Autotuner, "_bench")


def start(run_s: float, compile_s: float) -> None:
    """Enforce both budgets from now on (call once, in the child's main thread)."""
    instrument_triton()
    began = time.monotonic()

    def check(signum: int, frame: Any) -> None:
        compiling = CLOCK.now_spent()
        if compiling > compile_s:
            raise CompileBudgetExceeded(
                f"compilation and autotuning took more than {compile_s:g} s (budgeted apart "
                "from the run time); prune autotune configs or raise the job's compile limit "
                "(limits.compile_s in POST /v1/jobs, --compile-limit on the command line)")
        if time.monotonic() - began - compiling > run_s:
            raise RunBudgetExceeded(
                f"the run exceeded its {run_s:g} s limit (not counting {compiling:.1f} s of "
                "compilation and autotuning); raise the job's run limit if the kernel needs "
                "longer (limits.run_s in POST /v1/jobs, --run-limit on the command line)")

    signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, CHECK_INTERVAL_S, CHECK_INTERVAL_S)


def stop() -> None:
    """Stop enforcing (the result is being written)."""
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
