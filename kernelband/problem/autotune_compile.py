"""Compile an autotuned kernel's configs side by side before Triton times them one by one.

`@triton.autotune` times each config in turn, compiling each on first use: a kernel with
hundreds of configs (TritonBench-G's int8_dequant_matmul has 418, called with two shapes) spends
minutes compiling on one core while the others sit idle. `install()` makes the first timing of a
tuning round compile every config of the round first, on `workers()` threads through Triton's
`AsyncCompileMode` (Triton's compiler passes and ptxas run outside the GIL), then lets the
autotuner time them as before from its in-memory cache. Which config wins and how it is timed
do not change. Where Triton has no `AsyncCompileMode`, or under the interpreter (nothing to
compile), nothing is patched.

A config whose compile is still running `config_compile_s` after it started is left out of its
round: the autotuner times it as failing, as Triton times a config that runs out of resources,
and a line on stderr names it. Its compile runs on in the background, unwaited (`on_late` hears
of its thread, so a compile clock can stop counting it). One config of a round always finishes,
however long it takes. TritonBench-G's chunk_retention_ops is the case in point: on an H200 its
backward kernel compiles in 36 s at 4 warps, 170 s at 2 and did not finish in 7 minutes at 1.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# A round of one config compiles as before: there is nothing to do side by side.
MIN_CONFIGS = 2
_MARK = "_kernelband_autotune_compile"
_POLL_S = 1.0  # how often a round whose compiles have not all started checks its deadlines


@dataclass
class Policy:
    """What `install()` was told: 0 s means wait for every config, however long."""

    config_compile_s: float = 0.0
    on_late: Callable[[set[int]], None] | None = None


POLICY = Policy()


def workers() -> int:
    """Compile threads: KERNELBAND_AUTOTUNE_COMPILE_THREADS, else the CPUs this process may
    use, at most 8 (1: compile one by one, as Triton does)."""
    configured = os.environ.get("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "")
    if configured.strip():
        return max(1, int(configured))
    return max(1, min(8, len(os.sched_getaffinity(0))))


@dataclass
class _Compile:
    started: float = 0.0  # monotonic; 0 until a thread takes it up
    thread: int = 0


@dataclass
class RoundResult:
    compiled: int  # configs whose compile was submitted (or already in memory)
    late: list[Any] = field(default_factory=list)  # configs left out: still compiling
    late_threads: set[int] = field(default_factory=set)


def _timed_mode(pool: Any) -> Any:
    """An AsyncCompileMode that notes when and on which thread each compile starts."""
    from triton.runtime._async_compile import AsyncCompileMode

    class TimedCompileMode(AsyncCompileMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(pool, ignore_errors=True)
            self.compiles: dict[Any, _Compile] = {}  # raw future -> when and where

        def submit(self, key: Any, compile_fn: Callable[[], Any], *rest: Any) -> Any:
            record = _Compile()

            def timed() -> Any:
                record.thread = threading.get_ident()
                record.started = time.monotonic()
                return compile_fn()

            future_kernel = super().submit(key, timed, *rest)
            self.compiles.setdefault(future_kernel.future, record)
            return future_kernel

    return TimedCompileMode()


def _wait(compiles: dict[Any, _Compile], deadline_s: float) -> tuple[set[Any], set[Any]]:
    """Wait for the compiles; returns (finished, late). Once one has finished, a compile that
    has run longer than `deadline_s` (0: no limit) is late and no longer waited for."""
    from concurrent.futures import FIRST_COMPLETED, wait

    finished: set[Any] = set()
    late: set[Any] = set()
    while waiting := set(compiles) - finished - late:
        timeout = None
        if deadline_s > 0 and finished:
            starts = [compiles[f].started for f in waiting]
            timeout = _POLL_S if not all(starts) else max(0.0, min(starts) + deadline_s - time.monotonic())
        done, _ = wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
        finished |= done
        if deadline_s > 0 and finished:
            now = time.monotonic()
            late |= {f for f in waiting - done
                     if compiles[f].started and now - compiles[f].started > deadline_s}
    return finished, late


def compile_all(fn: Any, args: tuple[Any, ...], meta: dict[str, Any], configs: list[Any],
                deadline_s: float = 0.0) -> RoundResult:
    """Compile `fn` for every config on `workers()` threads without launching it. A config
    that fails to compile is left for the timing run to report; one still compiling
    `deadline_s` after it started (0: no limit) is returned in `late`."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime import _async_compile

    pool = ThreadPoolExecutor(workers(), thread_name_prefix="kernelband-compile")
    mode = _timed_mode(pool)
    submitted: dict[int, Any] = {}  # id(config) -> FutureKernel, or the kernel already in memory
    token = _async_compile.active_mode.set(mode)
    try:
        for config in configs:
            try:
                submitted[id(config)] = fn.run(*args, **{**meta, **config.all_kwargs(), "warmup": True})
            except Exception:  # noqa: BLE001 - the timing run compiles it again, says why
                continue
    finally:
        _async_compile.active_mode.reset(token)
    try:
        finished, late = _wait(mode.compiles, deadline_s)
    finally:  # a budget that ran out drops the compiles not started yet
        pool.shutdown(wait=False, cancel_futures=True)
    result = RoundResult(compiled=len(submitted))
    for config in configs:
        if (kernel := submitted.get(id(config))) is None:
            continue
        future = getattr(kernel, "future", None)
        if future in late:
            result.late.append(config)
            result.late_threads.add(mode.compiles[future].thread)
        elif future in finished:
            kernel.result(ignore_errors=True)  # into the kernel's cache, as Triton's mode does
    return result


def _describe(config: Any) -> str:
    try:
        return str(config)
    except Exception:  # noqa: BLE001 - a message only
        return repr(config)


def _remembering_prune(original: Callable[..., Any]) -> Callable[..., Any]:
    def prune_configs(self: Any, kwargs: dict[str, Any]) -> Any:
        pruned = original(self, kwargs)
        self._kernelband_round = list(pruned)  # a new tuning round: nothing compiled yet
        self._kernelband_late = set()
        return pruned

    setattr(prune_configs, _MARK, True)
    prune_configs.__wrapped__ = original  # type: ignore[attr-defined]
    return prune_configs


def _compiling_bench(original: Callable[..., Any]) -> Callable[..., Any]:
    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        configs = getattr(self, "_kernelband_round", None)
        if configs and len(configs) >= MIN_CONFIGS and workers() > 1:
            self._kernelband_round = None  # once per round
            result = compile_all(self.fn, args, meta, configs, POLICY.config_compile_s)
            self._kernelband_late = {id(c) for c in result.late}
            if result.late:
                if POLICY.on_late is not None:
                    POLICY.on_late(result.late_threads)
                name = getattr(self.fn, "__name__", "kernel")
                print(f"kernelband: {len(result.late)} of {len(configs)} autotune configs of {name} "
                      f"left out of its tuning round, still compiling after "
                      f"{POLICY.config_compile_s:.0f} s (the job's limits.config_compile_s, "
                      f"--config-compile-limit): "
                      + "; ".join(_describe(c) for c in result.late), file=sys.stderr, flush=True)
        if id(config) in getattr(self, "_kernelband_late", ()):
            inf = float("inf")
            return [inf, inf, inf]  # as Triton times a config that cannot run
        return original(self, *args, config=config, **meta)

    setattr(_bench, _MARK, True)
    _bench.__wrapped__ = original  # type: ignore[attr-defined]
    return _bench


def install(config_compile_s: float = 0.0, on_late: Callable[[set[int]], None] | None = None) -> bool:
    """Patch Triton's Autotuner (idempotent); False where it cannot be done here.
    `config_compile_s` > 0 leaves a config out of its round once its compile has run that long;
    `on_late` gets the threads those compiles run on."""
    POLICY.config_compile_s, POLICY.on_late = config_compile_s, on_late
    if os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        from triton.runtime import _async_compile, autotuner  # noqa: F401
    except ImportError:  # a Triton without AsyncCompileMode
        return False
    cls = getattr(autotuner, "Autotuner", None)
    if cls is None or not {"_bench", "prune_configs"} <= set(cls.__dict__):
        return False
    if not getattr(cls.__dict__["_bench"], _MARK, False):
        cls._bench = _compiling_bench(cls.__dict__["_bench"])
        cls.prune_configs = _remembering_prune(cls.__dict__["prune_configs"])
    return True
