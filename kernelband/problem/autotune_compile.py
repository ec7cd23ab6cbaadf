"""Compile an autotuned kernel's configs side by side before Triton times them one by one.

`@triton.autotune` times each config in turn, compiling each on first use: a kernel with
hundreds of configs (TritonBench-G's int8_dequant_matmul has 418, called with two shapes) spends
minutes compiling on one core while the others sit idle. `install()` makes the first timing of a
tuning round compile every config of the round first, on `workers()` threads through Triton's
`AsyncCompileMode` (Triton's compiler passes and ptxas run outside the GIL), then lets the
autotuner time them as before from its in-memory cache. Which config wins and how it is timed
do not change. Where Triton has no `AsyncCompileMode`, or under the interpreter (nothing to
compile), nothing is patched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

# Rounds with fewer configs compile as before: the threads would cost more than they save.
MIN_CONFIGS = 4
_MARK = "_kernelband_autotune_compile"


def workers() -> int:
    """Compile threads: KERNELBAND_AUTOTUNE_COMPILE_THREADS, else the CPUs this process may
    use, at most 8 (1: compile one by one, as Triton does)."""
    configured = os.environ.get("KERNELBAND_AUTOTUNE_COMPILE_THREADS", "")
    if configured.strip():
        return max(1, int(configured))
    return max(1, min(8, len(os.sched_getaffinity(0))))


def compile_all(fn: Any, args: tuple[Any, ...], meta: dict[str, Any], configs: list[Any]) -> int:
    """Compile `fn` for every config on `workers()` threads without launching it; returns how
    many compiled. A config that fails to compile is left for the timing run to report."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime._async_compile import AsyncCompileMode

    compiled = 0
    pool = ThreadPoolExecutor(workers(), thread_name_prefix="kernelband-compile")
    try:
        with AsyncCompileMode(pool, ignore_errors=True):  # waits for every compile on leaving
            for config in configs:
                try:
                    fn.run(*args, **{**meta, **config.all_kwargs(), "warmup": True})
                    compiled += 1
                except Exception:  # noqa: BLE001 - the timing run compiles it again, says why
                    continue
    finally:  # a budget that ran out drops the compiles not started yet
        pool.shutdown(wait=False, cancel_futures=True)
    return compiled


def _remembering_prune(original: Callable[..., Any]) -> Callable[..., Any]:
    def prune_configs(self: Any, kwargs: dict[str, Any]) -> Any:
        pruned = original(self, kwargs)
        self._kernelband_round = list(pruned)  # a new tuning round: nothing compiled yet
        return pruned

    setattr(prune_configs, _MARK, True)
    prune_configs.__wrapped__ = original  # type: ignore[attr-defined]
    return prune_configs


def _compiling_bench(original: Callable[..., Any]) -> Callable[..., Any]:
    def _bench(self: Any, *args: Any, config: Any, **meta: Any) -> Any:
        configs = getattr(self, "_kernelband_round", None)
        if configs and len(configs) >= MIN_CONFIGS and workers() > 1:
            self._kernelband_round = None  # once per round
            compile_all(self.fn, args, meta, configs)
        return original(self, *args, config=config, **meta)

    setattr(_bench, _MARK, True)
    _bench.__wrapped__ = original  # type: ignore[attr-defined]
    return _bench


def install() -> bool:
    """Patch Triton's Autotuner (idempotent); False where it cannot be done here."""
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
