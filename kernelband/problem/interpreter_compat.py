"""Let the CPU Triton interpreter run what a GPU build of Triton accepts (sandbox child only).

`install()` patches the installed Triton, once per process, where its interpreter differs from
its GPU path:

- `a and b` / `a or b` on blocks are element-wise, as the GPU compiler reads them (plain
  Python would take the truth value of a whole block and keep one operand, so a mask such as
  `rows < M and cols < N` lost its first half and loads ran out of bounds);
- parameters annotated with the string "tl.constexpr" are constexpr, as the GPU JIT reads them;
- a few `triton.language.extra.libdevice` functions (tanh, rsqrt, ...) have element-wise
  numpy implementations (the interpreter leaves libdevice stubs that return None);
- a launch grid given as a list (`kernel[[b, n]](...)`) is taken as a tuple, as on a GPU;
- a kernel argument that is not a tensor but has `data_ptr()` and `dtype` (a tensor-like
  buffer such as FlagGems' `StridedBuffer`) in CPU memory is passed by its pointer, as the GPU
  JIT passes it (the interpreter wanted its torch storage to copy to the host, and it already
  is host memory);
- block pointers (`tl.make_block_ptr`, `tl.advance`, and `tl.load` / `tl.store` on them), which
  Triton 3.7+ removed while GPU nodes on Triton 3.6 still run them, are emulated with plain
  pointer arithmetic. Every block access is masked to the tensor's bounds (an out-of-bounds
  access is undefined on a GPU; here it reads the padding value and writes nothing).

Nothing is patched where the installed Triton still has block pointers.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Sequence
from typing import Any

from kernelband.problem import interpreter_fastpath, interpreter_memory

_installed: list[bool] = []


class BlockPointer:
    """A block pointer as plain values: base pointer, shape, strides, offsets, block shape."""

    def __init__(self, base: Any, shape: Sequence[Any], strides: Sequence[Any],
                 offsets: Sequence[Any], block_shape: Sequence[Any]) -> None:
        self.base, self.shape, self.strides = base, list(shape), list(strides)
        self.offsets, self.block_shape = list(offsets), [_int(b) for b in block_shape]

    @property
    def dtype(self) -> Any:
        """The base pointer's type: `.element_ty` is what a load returns, as on a GPU."""
        return self.base.dtype

    @property
    def type(self) -> Any:
        return self.base.type

    def advance(self, offsets: Sequence[Any], **_: Any) -> BlockPointer:
        moved = [o + d for o, d in zip(self.offsets, _items(offsets), strict=True)]
        return BlockPointer(self.base, self.shape, self.strides, moved, self.block_shape)

    def pointers_and_mask(self) -> tuple[Any, Any]:
        """The block's element pointers and its in-bounds mask, broadcast to the block shape."""
        import triton.language as tl

        rank = len(self.block_shape)
        pointers, mask = self.base, None
        for dim, size in enumerate(self.block_shape):
            index = tl.arange(0, size) + self.offsets[dim]
            for _ in range(dim):
                index = tl.expand_dims(index, 0)
            for axis in range(dim + 1, rank):
                index = tl.expand_dims(index, axis)
            pointers = pointers + index * self.strides[dim]
            inside = (index >= 0) & (index < self.shape[dim])
            mask = inside if mask is None else mask & inside
        return pointers, mask


def _int(value: Any) -> int:
    return int(getattr(value, "value", value))


def _items(value: Any) -> list[Any]:
    value = getattr(value, "values", value) if not isinstance(value, list | tuple) else value
    return list(value) if isinstance(value, list | tuple) else [value]


def _builtin(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn.__triton_builtin__ = True  # type: ignore[attr-defined]
    return fn


def _make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                    order: Any = None, _semantic: Any = None) -> BlockPointer:
    return BlockPointer(base, _items(shape), _items(strides), _items(offsets), _items(block_shape))


def _advance(base: Any, offsets: Any, _semantic: Any = None) -> BlockPointer:
    return base.advance(_items(offsets))  # type: ignore[no-any-return]


def _padding(option: Any) -> float:
    return float("nan") if str(getattr(option, "value", option) or "") == "nan" else 0.0


def _wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def load(pointer: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(pointer, BlockPointer):
            return original(pointer, *args, **kwargs)
        pointers, mask = pointer.pointers_and_mask()
        padding = _padding(kwargs.get("padding_option", ""))
        return original(pointers, mask=mask, other=padding, _semantic=kwargs.get("_semantic"))

    return _builtin(load)


def _wrap_store(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def store(pointer: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(pointer, BlockPointer):
            return original(pointer, value, *args, **kwargs)
        pointers, mask = pointer.pointers_and_mask()
        return original(pointers, value, mask=mask, _semantic=kwargs.get("_semantic"))

    return _builtin(store)


def _string_constexprs(fn: Any, arg_names: Any) -> list[str]:
    import inspect

    annotations = inspect.get_annotations(fn)
    return [name for name in arg_names if isinstance(annotations.get(name), str)
            and annotations[name].strip().strip("'\"").split(".")[-1] == "constexpr"]


def _patched_executor_init(init: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(init)
    def patched(self: Any, fn: Any, arg_names: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(grid, list):
            grid = tuple(grid)
        elif callable(grid):
            inner = grid
            grid = lambda meta: tuple(inner(meta))  # noqa: E731
        init(self, fn, arg_names, grid, *args, **kwargs)
        extra = [n for n in _string_constexprs(fn, arg_names) if n not in self.constexprs]
        self.constexprs = list(self.constexprs) + extra

    return patched


def _raw_pointer(value: Any) -> bool:
    """A tensor-like argument in CPU memory that only offers `data_ptr()` (no torch storage)."""
    import torch

    if isinstance(value, torch.Tensor) or not hasattr(value, "data_ptr"):
        return False
    if hasattr(value, "untyped_storage") or not hasattr(value, "dtype"):
        return False
    return str(getattr(value, "device", "cpu")).startswith("cpu")


def _patched_host_args(executor: Any) -> None:
    """Raw-pointer arguments bypass the interpreter's host copy (they are host memory)."""
    init_args, restore_args = executor._init_args_hst, executor._restore_args_dev

    def split(args: Any, kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        return ([None if _raw_pointer(a) else a for a in args],
                {k: None if _raw_pointer(v) else v for k, v in kwargs.items()})

    def merge(dev: Any, dev_kw: dict[str, Any], hst: Any, hst_kw: dict[str, Any]) -> tuple[Any, Any]:
        return ([d if _raw_pointer(d) else h for d, h in zip(dev, hst, strict=True)],
                {k: dev_kw[k] if _raw_pointer(dev_kw.get(k)) else v for k, v in hst_kw.items()})

    @functools.wraps(init_args)
    def init_args_hst(self: Any, args_dev: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        hst, hst_kw = init_args(self, *split(args_dev, kwargs))
        return merge(args_dev, kwargs, hst, hst_kw)

    @functools.wraps(restore_args)
    def restore_args_dev(self: Any, args_dev: Any, args_hst: Any, kwargs: dict[str, Any],
                         kwargs_hst: dict[str, Any]) -> None:
        dev, dev_kw = split(args_dev, kwargs)
        hst, hst_kw = split(args_hst, kwargs_hst)
        restore_args(self, dev, hst, dev_kw, hst_kw)

    executor._init_args_hst, executor._restore_args_dev = init_args_hst, restore_args_dev


def _numpy_elementwise(np_fn: Callable[..., Any]) -> Callable[..., Any]:
    def apply(*args: Any, **_: Any) -> Any:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        first = next(a for a in args if isinstance(a, tl.tensor))
        data = [a.handle.data if isinstance(a, tl.tensor) else a for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(np_fn(*data)).astype(first.handle.data.dtype)
        return tl.tensor(TensorHandle(out, first.handle.dtype), first.type)

    return apply


def _patch_libdevice() -> None:
    import numpy as np

    try:
        from triton.language.extra import libdevice
    except ImportError:  # pragma: no cover - older triton layouts
        return
    functions: dict[str, Callable[..., Any]] = {
        "tanh": np.tanh, "rsqrt": lambda x: 1.0 / np.sqrt(x), "exp": np.exp, "exp2": np.exp2,
        "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
        "pow": np.power, "fast_expf": np.exp, "fast_logf": np.log, "abs": np.abs,
        "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
        "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "tan": np.tan, "atan": np.arctan,
        "fmod": np.fmod, "rint": np.rint, "log1p": np.log1p, "expm1": np.expm1,
    }
    for name, np_fn in functions.items():
        if hasattr(libdevice, name):
            setattr(libdevice, name, _numpy_elementwise(np_fn))


def _is_block(value: Any) -> bool:
    shape = getattr(getattr(value, "type", None), "shape", None) or ()
    return any(_int(d) != 1 for d in shape)


def bool_and(left: Any, right: Callable[[], Any]) -> Any:
    """`left and right()`, element-wise when `left` is a block (right evaluated lazily)."""
    if _is_block(left):
        return left & right()
    if not left:
        return left
    value = right()
    return left & value if _is_block(value) else value


def bool_or(left: Any, right: Callable[[], Any]) -> Any:
    """`left or right()`, element-wise when `left` is a block (right evaluated lazily)."""
    if _is_block(left):
        return left | right()
    if left:
        return left
    value = right()
    return left | value if _is_block(value) else value


def _lazy(node: ast.expr) -> ast.Lambda:
    empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.Lambda(args=empty, body=node)


def _bool_transformer(base: type) -> type:
    class BoolOpTransformer(base):  # type: ignore[valid-type,misc]
        def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
            node = self.generic_visit(node)
            name = "_kb_bool_and" if isinstance(node.op, ast.And) else "_kb_bool_or"
            result = node.values[0]
            for value in node.values[1:]:
                result = ast.Call(func=ast.Name(id=name, ctx=ast.Load()),
                                  args=[result, _lazy(value)], keywords=[])
            return ast.copy_location(result, node)

    return BoolOpTransformer


def _patch_bool_ops(interpreter: Any) -> None:
    base, rewriter = getattr(interpreter, "ASTTransformer", None), getattr(interpreter, "FunctionRewriter", None)
    if base is None or rewriter is None:
        return
    # the rewriter copies the interpreter module's globals into each kernel's globals
    interpreter._kb_bool_and, interpreter._kb_bool_or = bool_and, bool_or
    rewriter.ast_transformer = _bool_transformer(base)()


def _bool_masks(builder_class: Any) -> None:
    """Masks reach the interpreter's native load/store as contiguous bool arrays."""
    import numpy as np

    def coerce(mask: Any) -> Any:
        data = mask.data
        if data.dtype != np.bool_ or not data.flags.c_contiguous:
            mask.data = np.ascontiguousarray(data.astype(np.bool_))
        return mask

    load, store = builder_class.create_masked_load, builder_class.create_masked_store

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        return load(self, ptrs, coerce(mask), *args, **kwargs)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        return store(self, ptrs, value, coerce(mask), *args, **kwargs)

    builder_class.create_masked_load, builder_class.create_masked_store = masked_load, masked_store


def _block_pointers_removed() -> bool:
    import triton.language as tl

    return "removed" in (tl.core.make_block_ptr.__doc__ or "")


def _patch_block_pointers() -> None:
    import triton.language as tl

    load, store = _wrap_load(tl.core.load), _wrap_store(tl.core.store)
    for module in (tl, tl.core):
        module.make_block_ptr = _builtin(_make_block_ptr)  # type: ignore[attr-defined]
        module.advance = _builtin(_advance)  # type: ignore[attr-defined]
        module.load = load  # type: ignore[attr-defined]
        module.store = store  # type: ignore[attr-defined]


def install() -> None:
    """Apply the patches (idempotent); a Triton without an interpreter is left alone."""
    if _installed:
        return
    _installed.append(True)
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - no triton
        return
    executor = getattr(interpreter, "GridExecutor", None)
    if executor is not None:
        executor.__init__ = _patched_executor_init(executor.__init__)
        if hasattr(executor, "_init_args_hst") and hasattr(executor, "_restore_args_dev"):
            _patched_host_args(executor)
    _patch_libdevice()
    _patch_bool_ops(interpreter)
    interpreter_fastpath.install(interpreter)
    interpreter_memory.install(interpreter)  # after the host-argument patch above: wraps it
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is not None and hasattr(builder, "create_masked_load"):
        _bool_masks(builder)
    if _block_pointers_removed():
        _patch_block_pointers()
