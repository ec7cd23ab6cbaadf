"""Autotuned kernels in a runner: the config each one picked, and the original's picks reused.

Triton's autotuner times every config on a kernel's first call with a new key and keeps the
fastest. Where two configs are within its timing noise of each other, two processes of identical
code can keep different ones, and then differ by a fixed amount for their whole life: a
difference the paired rounds cannot see, because it does not change from round to round. So a
kernel the candidate left unchanged (same source, same configs) runs the config the original's
runner picked for each key; a kernel the candidate changed autotunes on its own.

This runs in a runner, beside untrusted code: what it reports is a diagnostic and a request to
the other runner, never a measured figure.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Iterable
from types import FunctionType, ModuleType
from typing import Any

from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

WRAPPER_DEPTH = 4  # heuristics and other decorators wrap an autotuner in a few `.fn` layers


def autotuners(modules: Iterable[ModuleType]) -> dict[str, Autotuner]:
    """Every autotuner a module exposes at top level, by its global name (first module wins)."""
    found: dict[str, Autotuner] = {}
    for module in modules:
        for name, value in vars(module).items():
            for _ in range(WRAPPER_DEPTH):
                if isinstance(value, Autotuner):
                    found.setdefault(name, value)
                    break
                value = getattr(value, "fn", None)
                if value is None:
                    break
    return found


def fingerprint(tuner: Autotuner) -> str:
    """Source, keys and configs: equal fingerprints autotune the same kernel over the same choices."""
    jit: Any = tuner.fn
    while jit is not None and not isinstance(jit, JITFunction | FunctionType):
        jit = getattr(jit, "fn", None)  # the interpreter wraps the plain function instead
    source = jit.src if isinstance(jit, JITFunction) else inspect.getsource(jit) if jit else ""
    text = "\n".join([source, repr(list(tuner.keys)), *(str(c) for c in tuner.configs)])
    return hashlib.sha256(text.encode()).hexdigest()


def _index(tuner: Autotuner, config: Any) -> int | None:
    for i, known in enumerate(tuner.configs):
        if known is config:
            return i
    text = str(config)
    return next((i for i, known in enumerate(tuner.configs) if str(known) == text), None)


def picks(modules: Iterable[ModuleType]) -> dict[str, dict[str, Any]]:
    """Per autotuner that has picked: its fingerprint and, per key, the index of its config."""
    report = {}
    for name, tuner in autotuners(modules).items():
        chosen = [[repr(key), index] for key, config in tuner.cache.items()
                  if (index := _index(tuner, config)) is not None]
        if chosen:
            report[name] = {"fingerprint": fingerprint(tuner), "picks": chosen,
                            "configs": [str(tuner.configs[i]) for _, i in chosen]}
    return report


def pin(modules: Iterable[ModuleType], wanted: dict[str, Any]) -> list[str]:
    """Take `wanted` picks (from `picks` in another runner) for autotuners with the same
    fingerprint that have not picked for that key yet; the names of those pinned."""
    pinned = []
    for name, tuner in autotuners(modules).items():
        entry = wanted.get(name)
        if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint(tuner):
            continue
        taken = 0
        for key_text, index in entry.get("picks", []):
            try:
                key = ast.literal_eval(key_text)
            except (ValueError, SyntaxError):  # a key of something other than plain values
                continue
            if isinstance(index, int) and 0 <= index < len(tuner.configs) and key not in tuner.cache:
                tuner.cache[key] = tuner.configs[index]
                taken += 1
        if taken:
            pinned.append(name)
    return pinned


# The compile-only pass (`compile_only(True)` ... `compile_only(False)`): while it is on, every
# autotuner that runs, found among a module's globals or not, calls each config once instead of
# timing it, so the process compiles every config without holding the GPU for the timings; when
# it ends, the timing is restored and the picks made meanwhile (from no timings) are forgotten,
# so the next call of each key times configs that are compiled already. Nothing is written to
# Triton's autotune disk cache meanwhile.
_MISSING = object()
_PASS: dict[int, tuple[Autotuner, set[Any], Any, bool]] = {}  # id -> (tuner, keys before, do_bench, cache_results)
_UNPATCHED_RUN = Autotuner.run


def _call_once(kernel_call: Any, quantiles: Any = None) -> list[float]:
    kernel_call()
    return [0.0, 0.0, 0.0]


def _run_compiling(self: Autotuner, *args: Any, **kwargs: Any) -> Any:
    if id(self) not in _PASS:
        cache_results = bool(getattr(self, "cache_results", False))
        _PASS[id(self)] = (self, set(self.cache), self.__dict__.get("do_bench", _MISSING), cache_results)
        self.__dict__["do_bench"] = _call_once  # the instance's value shadows the cached property
        if cache_results:
            self.cache_results = False
    return _UNPATCHED_RUN(self, *args, **kwargs)


def compile_only(on: bool) -> int:
    """Start (`on`) or end the compile-only pass; the number of autotuners it touched (at the end)."""
    if on:  # a pass already on goes on: what it saved is restored once, at its end
        Autotuner.run = _run_compiling  # type: ignore[method-assign]
        return 0
    Autotuner.run = _UNPATCHED_RUN  # type: ignore[method-assign]
    touched = len(_PASS)
    for tuner, before, do_bench, cache_results in _PASS.values():
        if do_bench is _MISSING:
            tuner.__dict__.pop("do_bench", None)
        else:
            tuner.__dict__["do_bench"] = do_bench
        if cache_results:
            tuner.cache_results = True
        for key in set(tuner.cache) - before:
            del tuner.cache[key]
    _PASS.clear()
    return touched
