"""Correctness, timing and features of one recorded candidate (runs in a recorder child).

A candidate is checked by running the problem's test function with the candidate's region and
comparing every result (public and held-out keys) with the original's, per seed. On a GPU its
time is the sum, over the entry-function calls the test makes, of the lower-quartile CUDA-event
time of that call (kernelband.profile.timing: L2 flushed per run), the calls replayed on the arguments
the test passed; on the CPU it is the service's cost-model estimate, labelled estimated.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.problem.runtime import TritonBenchRuntime

MAX_TIMED_CALLS = 4  # entry calls timed per candidate (the first ones the test makes)


@dataclass
class Outcome:
    """What one candidate produced: a time and features, or a failure reason."""

    ok: bool
    reason: str = "ok"
    message: str = ""
    time_ms: float = 0.0
    phi: list[float] = field(default_factory=list)
    h: list[float] = field(default_factory=list)
    calls_timed: int = 0
    cv: float = 0.0
    median_ms: float = 0.0  # sum of the calls' medians (time_ms sums their lower quartiles)


class Recorder:
    """Loads candidates of one problem and evaluates them against cached reference results."""

    def __init__(self, problem: KernelProblem, device: str, workdir: Path, seeds: int,
                 gpu_lock: AbstractContextManager[Any] | None = None, target: str = "h100") -> None:
        from kernelband.problem.runtime import load_runtime

        self.problem, self.device, self.workdir = problem, device, workdir
        self.seeds, self.target = seeds, target
        self.lock: AbstractContextManager[Any] = gpu_lock if gpu_lock is not None else nullcontext()
        self.original = load_runtime(problem, None, device, workdir=workdir)
        self._expected: dict[int, dict[str, Any]] = {}
        self._cuda: Any = None

    def expected(self, seed: int) -> dict[str, Any]:
        """The original's results for `seed` (computed once)."""
        from kernelband.problem.tritonbench import run_test

        if seed not in self._expected:
            assert isinstance(self.original, TritonBenchRuntime), "records TritonBench-G files only"
            module = self.original.original_module
            self._expected[seed] = run_test(module, self.original.test_name, seed, self.device)
        return self._expected[seed]

    def evaluate(self, editable: str | None) -> Outcome:
        """Check, then time and profile one region (None: the original)."""
        from kernelband.problem.model import ProblemLoadError
        from kernelband.problem.runtime import load_runtime

        try:
            runtime = load_runtime(self.problem, editable, self.device, workdir=self.workdir)
        except (ProblemLoadError, Exception) as exc:  # noqa: BLE001 - any import failure is a result
            return Outcome(False, "load_error", f"{type(exc).__name__}: {exc}"[:300])
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        failure = self._check(runtime, calls)
        if failure is not None:
            return failure
        try:
            return self._measure(runtime, editable, calls)
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot be timed is a failure
            return Outcome(False, "measure_error", f"{type(exc).__name__}: {exc}"[:300])

    def _check(self, runtime: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Outcome | None:
        from kernelband.evaluate.compare import compare_results
        from kernelband.problem.tritonbench import run_test

        module = runtime.candidate_module
        for seed in range(self.seeds):
            expected = self.expected(seed)
            restore = _capture_entry(module, self.problem.entry, calls) if seed == 0 else None
            try:
                actual = run_test(module, runtime.test_name, seed, self.device)
            except Exception as exc:  # noqa: BLE001 - the candidate's own error is the result
                return Outcome(False, "candidate_error", f"{type(exc).__name__}: {exc}"[:300])
            finally:
                if restore is not None:
                    restore()
            for key, value in expected.items():
                if key not in actual:
                    return Outcome(False, "missing_result", f"no result {key!r}")
                found = compare_results(value, actual[key], self.problem.tolerance, where=key)
                if found is not None:
                    return Outcome(False, found.reason, f"seed {seed}, {found.where}: {found.detail}"[:300])
        return None

    def _measure(self, runtime: Any, editable: str | None,
                 calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Outcome:
        if not self.device.startswith("cuda"):
            from kernelband.profile.measure import estimate_candidate

            measurement, features = estimate_candidate(self.problem, editable, "cpu")
            return Outcome(True, time_ms=measurement.time_ms, phi=list(features.phi), h=list(features.h))
        return self._measure_cuda(runtime, calls)

    def _measure_cuda(self, runtime: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Outcome:
        from kernelband.profile.gpu import gpu_features
        from kernelband.profile.timing import CudaDevice, TimingConfig, measure

        if not calls:
            return Outcome(False, "no_entry_call", f"the test never called {self.problem.entry}()")
        if self._cuda is None:
            self._cuda = CudaDevice()
        entry: Callable[..., Any] = getattr(runtime.candidate_module, self.problem.entry)
        config = TimingConfig(warmup=3, min_reps=10, max_reps=40, budget_ms=5.0)
        total, median, cv = 0.0, 0.0, 0.0
        with self.lock:  # one process times at a time: concurrent kernels would skew the clock
            for args, kwargs in calls[:MAX_TIMED_CALLS]:
                stats = measure(self._cuda, _prepared(entry, args, kwargs), config)
                # the lower quartile: host stalls (other recorder processes compiling on the same
                # cores) only ever add time between an entry call's launches
                total += stats.q1_ms
                median += stats.median_ms
                cv = max(cv, stats.cv)
        features, _ = gpu_features(self.problem, runtime, self._cuda, self.target, 0, total)
        return Outcome(True, time_ms=total, phi=list(features.phi), h=list(features.h),
                       calls_timed=min(len(calls), MAX_TIMED_CALLS), cv=cv, median_ms=median)


def _prepared(entry: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], Callable[[], Any]]:
    return lambda: (lambda: entry(*args, **kwargs))


def _capture_entry(module: ModuleType, entry: str,
                   calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Callable[[], None]:
    """Wrap the module's entry function so its calls' arguments (copied) are kept; returns undo."""
    original = getattr(module, entry)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(calls) < MAX_TIMED_CALLS:
            calls.append((_clone(args), _clone(kwargs)))
        return original(*args, **kwargs)

    setattr(module, entry, wrapper)
    return lambda: setattr(module, entry, original)


def _clone(value: Any) -> Any:
    """A copy of the arguments with every tensor cloned (the call may change them in place)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    try:
        return copy.copy(value)
    except Exception:  # noqa: BLE001 - uncopyable objects are passed as they are
        return value
