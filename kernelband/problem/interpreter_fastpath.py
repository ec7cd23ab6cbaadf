"""Skip the CPU Triton interpreter's repeated language patching inside a kernel launch.

The interpreter patches `triton.language` (every builtin wrapped for the interpreter) when a
kernel is launched, and restores it when the launch ends. It patches again on every call of a
`@triton.jit` helper from inside the kernel, once per program instance: a kernel that calls
helpers in a grid of thousands of programs spent about a third of its time there (log_softmax
of TritonBench-G: 36,869 patchings, each an `inspect.getmembers` over the language modules).
Inside a launch the language modules the helper sees are already patched, so `install()` makes
that second patching a no-op; a helper that sees a language module the kernel does not (another
module's `triton.language.core`) is still patched as before.

It also remembers the numpy dtype of each Triton dtype (`_get_np_dtype` builds a table of them
on every call, once per operand of every operation of every program instance; a block type's
is its element type's).

And it drops the interpreter's integer-overflow checks where they cannot fire: every integer
`+`, `-` and `*` (pointer offsets included) was recomputed in int64 and compared against the
type's range, and the result went to a `device_assert` that does nothing unless the options
have `debug` on (they never do in the interpreter). A GPU build drops the same dead checks when
it compiles. About half the run time of integer-heavy kernels went there (rope_embedding,
matmul_dequant_int4 of TritonBench-G).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

# One set per running launch (a stack: a launch inside a launch, e.g. from a hook): the ids of
# the language modules the launch has patched.
_patched_now: list[set[int]] = []
_installed: list[bool] = []


def _language_ids(fn: Any) -> set[int]:
    import triton.language as tl

    return {id(value) for value in getattr(fn, "__globals__", {}).values()
            if value is tl or value is tl.core}


def _cached_patch_lang(original: Callable[[Any], Any], scope_class: type) -> Callable[[Any], Any]:
    @functools.wraps(original)
    def patch_lang(fn: Any) -> Any:
        languages = _language_ids(fn)
        if _patched_now and languages and languages <= _patched_now[-1]:
            return scope_class()  # already patched by the running launch: nothing to restore
        scope = original(fn)
        if _patched_now:
            _patched_now[-1].update(languages)
        return scope

    return patch_lang


def _tracked_launch(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        _patched_now.append(set())
        try:
            return call(self, *args, **kwargs)
        finally:
            _patched_now.pop()

    return launch


def install(interpreter: Any) -> None:
    """Patch `triton.runtime.interpreter` (idempotent; left alone where its layout differs)."""
    if _installed:
        return
    _installed.append(True)
    executor = getattr(interpreter, "GridExecutor", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    scope_class = getattr(interpreter, "_LangPatchScope", None)
    if executor is None or patch_lang is None or scope_class is None:
        return
    executor.__call__ = _tracked_launch(executor.__call__)
    interpreter._patch_lang = _cached_patch_lang(patch_lang, scope_class)
    np_dtype = getattr(interpreter, "_get_np_dtype", None)
    if np_dtype is not None:
        interpreter._get_np_dtype = _remembered(np_dtype)
    _skip_dead_overflow_checks(getattr(interpreter, "interpreter_builder", None))


def _skip_dead_overflow_checks(builder: Any) -> None:
    """`sanitize_overflow` off where `debug` is off (the check's assert would do nothing)."""
    options = getattr(builder, "options", None)
    if (not dataclasses.is_dataclass(options) or isinstance(options, type)
            or getattr(options, "debug", True) or not getattr(options, "sanitize_overflow", False)):
        return
    builder.options = dataclasses.replace(options, sanitize_overflow=False)


def _remembered(np_dtype: Callable[[Any], Any]) -> Callable[[Any], Any]:
    known: dict[Any, Any] = {}

    @functools.wraps(np_dtype)
    def get_np_dtype(tt_dtype: Any) -> Any:
        try:
            return known[tt_dtype]
        except KeyError:
            found = known[tt_dtype] = np_dtype(tt_dtype)
            return found
        except TypeError:  # unhashable: a block type's is its element type's
            import triton.language as tl

            if isinstance(tt_dtype, tl.block_type):
                return get_np_dtype(tt_dtype.element_ty)
            return np_dtype(tt_dtype)

    return get_np_dtype
