"""Turn a captured launch into what `triton.compile` needs: a JITFunction and its specialisation.

The rules follow Triton's own launch-time specialisation (3.3 and later, 3.6 and 3.9 alike):
tensors become typed pointers, divisible by 16 when their address is; integers become i32/i64
(u64 above the i64 range), divisible by 16 when they are, and the constant 1 is folded; `None`
is a constant; floats are fp32 and booleans u1, never specialised further.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kernelband.profile.launches import LaunchRecord

_TORCH_TO_TRITON = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
    "float8_e5m2fnuz": "fp8e5b16",
}
# a tensor wrapped by `triton.reinterpret` carries Triton's own dtype (str: "fp8e5"), as its launch
# does: its pointer type is that name
_TRITON_NAMES = frozenset(_TORCH_TO_TRITON.values()) | {"fp8e4b15"}
_DIVISIBILITY = 16


class StaticProfileError(ValueError):
    """A launch the static profiler cannot compile; the message says why and what to do."""


@dataclass(frozen=True)
class Specialisation:
    """Signature, constants and attributes of one launch, in `ASTSource` form."""

    signature: dict[str, str]
    constexprs: dict[tuple[int, ...], Any]
    attrs: dict[tuple[int, ...], list[list[Any]]]

    def key(self) -> str:
        """A stable text form for cache keys."""
        consts = sorted((k, _constant_key(v)) for k, v in self.constexprs.items())
        return f"{sorted(self.signature.items())}|{consts}|{sorted(self.attrs.items())}"


def _constant_key(value: Any) -> str:
    return getattr(value, "cache_key", None) or repr(value)


def _jit_classes() -> tuple[Any, Any]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return JITFunction, InterpretedFunction


_converted: dict[Any, Any] = {}


def as_jit_function(fn: Any) -> Any:
    """A compilable `JITFunction` for `fn`, rebuilding interpreter-mode kernels (and the
    `@triton.jit` helpers they call) as real JIT functions."""
    jit_cls, interp_cls = _jit_classes()
    if isinstance(fn, jit_cls):
        return fn
    if not isinstance(fn, interp_cls):
        raise StaticProfileError(f"{fn!r} is not a Triton kernel: decorate it with @triton.jit")
    pyfn = fn.fn
    if pyfn in _converted:
        return _converted[pyfn]
    options = {k: v for k, v in getattr(fn, "kwargs", {}).items() if k != "interpret"}
    try:
        jit = jit_cls(pyfn, **options)
    except ValueError as exc:  # Triton re-reads the source: the module file must still exist
        raise StaticProfileError(
            f"cannot read the source of kernel {pyfn.__name__}: profile it while the module file "
            "it was imported from still exists"
        ) from exc
    _converted[pyfn] = jit  # before converting helpers, so recursion terminates
    scope = dict(pyfn.__globals__)
    for name, value in scope.items():
        if isinstance(value, interp_cls):
            scope[name] = as_jit_function(value)
    jit.__globals__ = scope  # the code generator resolves helper calls through this scope
    return jit


def _interpreted_target(value: Any, interp_cls: type) -> Any:
    """The InterpretedFunction behind a module attribute or a tensor-member wrapper, if any."""
    if isinstance(value, interp_cls):
        return value
    for cell in getattr(value, "__closure__", None) or ():
        contents = cell.cell_contents
        if isinstance(contents, interp_cls):
            return contents
    return None


def _is_interpreter_patch(value: Any) -> bool:
    func = getattr(value, "func", value)  # functools.partial patches too
    code = getattr(func, "__code__", None)
    return code is not None and code.co_filename.endswith("interpreter.py")


def _leaked_original(owner: Any, name: str, value: Any) -> Any:
    """What an interpreter patch left behind replaced (None when unknown).

    Triton's interpreter patches `triton.language.core` when a kernel calls a library `@jit`
    function and never restores it; its wrappers keep the original as the `member` default,
    other patches are recovered from the `triton.language` namespace, which is restored.
    """
    import triton.language as tl

    while _is_interpreter_patch(value) and "member" in (getattr(value, "__kwdefaults__", None) or {}):
        value = value.__kwdefaults__["member"]
    if not _is_interpreter_patch(value):
        return value
    clean = getattr(tl, name, None)
    return None if clean is None or _is_interpreter_patch(clean) or owner is tl else clean


def _swap_for_compile(owner: Any, interp_cls: type, changes: list[tuple[Any, str, Any]]) -> None:
    for name, value in list(vars(owner).items()):
        replacement = None
        target = _interpreted_target(value, interp_cls)
        if target is not None:
            replacement = as_jit_function(target)
        elif _is_interpreter_patch(value) or (name == "static_print" and value is print):
            replacement = _leaked_original(owner, name, value)
        if replacement is not None and replacement is not value:
            changes.append((owner, name, value))
            setattr(owner, name, replacement)


_deinterpret_lock = threading.RLock()


@contextmanager
def deinterpreted() -> Iterator[None]:
    """Compile-time view of triton.language without interpreter objects.

    When Triton was imported with TRITON_INTERPRET=1 its own `@jit` library functions
    (`tl.sum`, `tl.sigmoid`, `x.to` helpers, ...) are interpreter objects, which the real code
    generator cannot call. For the duration of the block they are swapped for JIT functions
    and the interpreter knob is switched off; everything is restored afterwards.
    """
    import triton
    from triton.language import core

    _, interp_cls = _jit_classes()
    changes: list[tuple[Any, str, Any]] = []
    with _deinterpret_lock:
        owners = [m for n, m in list(sys.modules.items()) if n.startswith("triton.language") and m]
        for owner in [*owners, core.tensor, core.dtype, core.condition]:
            _swap_for_compile(owner, interp_cls, changes)
        try:
            with _interpreter_off(triton):
                yield
        finally:
            for owner, name, value in reversed(changes):
                setattr(owner, name, value)


@contextmanager
def _interpreter_off(triton: Any) -> Iterator[None]:
    """`knobs.runtime.interpret = False` inside the block; the knob's scope restores both its
    value and the TRITON_INTERPRET variable it mirrors (an explicit set would pin them)."""
    runtime_knobs = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime_knobs is None or not hasattr(runtime_knobs, "scope"):
        yield  # older Triton reads TRITON_INTERPRET only when a kernel is decorated
        return
    with runtime_knobs.scope():
        runtime_knobs.interpret = False
        yield


def _tensor_type(value: Any) -> str:
    name = str(value.dtype).replace("torch.", "")
    if name in _TRITON_NAMES:
        return "*" + name
    if name not in _TORCH_TO_TRITON:
        raise StaticProfileError(f"tensor dtype {name} has no Triton pointer type; use a float or int dtype")
    return "*" + _TORCH_TO_TRITON[name]


def _int_type(value: int) -> str:
    if -(2**31) <= value < 2**31:
        return "i32"
    if value >= 2**63:
        return "u64"
    return "i64"


def _param_flags(jit: Any, index: int) -> tuple[bool, bool, bool, str]:
    params = getattr(jit, "params", None)
    if not params or index >= len(params):
        return False, False, False, ""
    p = params[index]
    annotation = getattr(p, "annotation_type", "") or ""
    return (
        bool(getattr(p, "is_constexpr", False)),
        bool(getattr(p, "do_not_specialize", False)),
        bool(getattr(p, "do_not_specialize_on_alignment", False)),
        annotation if isinstance(annotation, str) else "",
    )


def specialise(record: LaunchRecord, jit: Any) -> Specialisation:
    """The specialisation Triton would compile for this launch."""
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for index, (name, value) in enumerate(record.args.items()):
        is_constexpr, no_spec, no_align, annotation = _param_flags(jit, index)
        path = (index,)
        divisible = False
        if is_constexpr or value is None or _is_constant_object(value):
            jit_cls, interp_cls = _jit_classes()
            constant = as_jit_function(value) if isinstance(value, interp_cls) else value
            signature[name], constexprs[path] = "constexpr", constant
        elif hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            signature[name] = _tensor_type(value)
            divisible = not no_align and value.data_ptr() % _DIVISIBILITY == 0
        elif isinstance(value, bool):
            signature[name] = "u1"
        elif isinstance(value, int):
            if value == 1 and not no_spec and not annotation:
                signature[name], constexprs[path] = "constexpr", 1
            else:
                signature[name] = annotation or _int_type(value)
                divisible = not no_spec and not no_align and value % _DIVISIBILITY == 0
        elif isinstance(value, float):
            signature[name] = annotation or "fp32"
        else:
            raise StaticProfileError(
                f"argument {name!r} of kernel {record.kernel_name} has type {type(value).__name__}, "
                "which the static profile does not support: pass tensors, ints, floats or constexprs"
            )
        if divisible:
            attrs[path] = [["tt.divisibility", _DIVISIBILITY]]
    return Specialisation(signature, constexprs, attrs)


def _is_constant_object(value: Any) -> bool:
    jit_cls, interp_cls = _jit_classes()
    return isinstance(value, jit_cls | interp_cls) or type(value).__name__ in ("dtype", "constexpr")
