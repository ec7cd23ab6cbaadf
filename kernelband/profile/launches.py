"""Record every Triton kernel launch, under the interpreter and on a GPU alike.

`capture_launches()` patches the `run` method of `JITFunction` and of the interpreter's
`InterpretedFunction` (the two places every `kernel[grid](...)` launch, autotuned or not, ends
up) for the duration of a `with` block. Both triton 3.6 and 3.9 launch through
`run(self, *args, grid, warmup, **kwargs)`.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Triton's NVIDIA defaults (CUDAOptions); used when a launch does not say.
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3


@dataclass
class LaunchRecord:
    """One kernel launch: which JIT function, with which arguments, grid and options."""

    kernel_name: str
    fn: Any  # the JITFunction or InterpretedFunction that was launched
    args: dict[str, Any]  # bound arguments in parameter order, defaults applied (constexprs too)
    grid: tuple[int, int, int]
    num_warps: int
    num_stages: int
    options: dict[str, Any] = field(default_factory=dict)  # other launch options (num_ctas, ...)
    interpreted: bool = False
    autotune_benchmark: bool = False  # launched by an @triton.autotune while timing its configs
    compiled: Any = None  # what the launch returned (a CompiledKernel on a GPU), once it ran
    stream: int | None = None  # the CUDA stream current at launch (None under the interpreter)

    @property
    def num_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def summary(self) -> dict[str, Any]:
        """A JSON-able description (tensors as dtype/shape/bytes)."""
        return {
            "kernel": self.kernel_name,
            "grid": list(self.grid),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "args": {k: describe_value(v) for k, v in self.args.items()},
        }


def describe_value(value: Any) -> Any:
    """A tensor as `{dtype, shape, nbytes}`; plain scalars as themselves; others by type name."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return {
            "dtype": str(value.dtype).replace("torch.", ""),
            "shape": list(getattr(value, "shape", ())),
            "nbytes": tensor_nbytes(value),
        }
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return type(value).__name__


def tensor_nbytes(value: Any) -> int:
    """Bytes a tensor argument spans (0 for anything that is not a tensor)."""
    if not hasattr(value, "element_size") or not hasattr(value, "numel"):
        return 0
    return int(value.numel()) * int(value.element_size())


_lock = threading.Lock()
_benchmarking = threading.local()  # depth of Autotuner._bench calls on this thread
_launching = threading.local()  # depth of captured kernel launches running on this thread
_sinks: list[tuple[list[LaunchRecord], bool]] = []  # (records, execute) per active capture
_originals: dict[tuple[type, str], Callable[..., Any]] = {}  # (class, method) -> original


def inside_launch() -> bool:
    """True while a captured Triton launch runs on this thread (the interpreter uses torch)."""
    return getattr(_launching, "depth", 0) > 0


def _python_function(jit_fn: Any) -> Callable[..., Any]:
    return jit_fn.fn if hasattr(jit_fn, "fn") else jit_fn


def _normalise_grid(grid: Any, bound: dict[str, Any]) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(bound)
    if isinstance(grid, int):
        grid = (grid,)
    dims = [int(g) for g in tuple(grid)] + [1, 1, 1]
    return dims[0], dims[1], dims[2]


def _record(jit_fn: Any, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any]) -> LaunchRecord:
    pyfn = _python_function(jit_fn)
    signature = inspect.signature(pyfn)
    params = set(signature.parameters)
    call_kwargs = {k: v for k, v in kwargs.items() if k in params}
    options = {k: v for k, v in kwargs.items() if k not in params}
    bound = signature.bind(*args, **call_kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    from triton.runtime.interpreter import InterpretedFunction

    return LaunchRecord(
        kernel_name=pyfn.__name__,
        fn=jit_fn,
        args=arguments,
        grid=_normalise_grid(grid, arguments),
        num_warps=int(options.pop("num_warps", None) or DEFAULT_NUM_WARPS),
        num_stages=int(options.pop("num_stages", None) or DEFAULT_NUM_STAGES),
        options={k: v for k, v in options.items() if v is not None and k != "debug"},
        interpreted=isinstance(jit_fn, InterpretedFunction),
        autotune_benchmark=getattr(_benchmarking, "depth", 0) > 0,
        stream=None if isinstance(jit_fn, InterpretedFunction) else _current_stream(),
    )


def _current_stream() -> int | None:
    """The current CUDA stream's handle (side-stream launches are refused by the checks)."""
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return int(torch.cuda.current_stream().cuda_stream)


def _make_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        sinks = list(_sinks)
        if not sinks or kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        launch_kwargs = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        try:
            record = _record(self, args, kwargs.get("grid"), launch_kwargs)
        except TypeError:
            return original(self, *args, **kwargs)  # bad arguments: let triton say what is wrong
        for records, _ in sinks:
            records.append(record)
        # A dry capture (every sink says execute=False) only wants the launch parameters.
        if all(not execute for _, execute in sinks):
            return None
        _launching.depth = getattr(_launching, "depth", 0) + 1
        try:
            record.compiled = original(self, *args, **kwargs)
        finally:
            _launching.depth -= 1
        return record.compiled

    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _make_bench_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        _benchmarking.depth = getattr(_benchmarking, "depth", 0) + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _benchmarking.depth -= 1

    _bench.__wrapped__ = original  # type: ignore[attr-defined]
    return _bench


def _bench_class() -> type | None:
    """Triton's Autotuner when it times configs through `_bench` (3.6 and 3.9 do)."""
    from triton.runtime import autotuner

    cls = getattr(autotuner, "Autotuner", None)
    return cls if cls is not None and "_bench" in cls.__dict__ else None


def _launch_classes() -> list[type]:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return [JITFunction, InterpretedFunction]


def _patch(cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    if (cls, name) not in _originals:
        _originals[(cls, name)] = cls.__dict__[name]
        setattr(cls, name, make(_originals[(cls, name)]))


def _install() -> None:
    for cls in _launch_classes():
        _patch(cls, "run", _make_wrapper)
    bench = _bench_class()
    if bench is not None:
        _patch(bench, "_bench", _make_bench_wrapper)


def _uninstall() -> None:
    for (cls, name), original in list(_originals.items()):
        setattr(cls, name, original)
        del _originals[(cls, name)]


@contextmanager
def capture_launches(execute: bool = True) -> Iterator[list[LaunchRecord]]:
    """Collect every Triton launch made inside the block into the yielded list.

    With `execute=False` kernels are not run (a dry capture, for the cost model); code that
    reads a kernel's output will then see unwritten buffers.
    """
    records: list[LaunchRecord] = []
    entry = (records, execute)
    with _lock:
        if not _sinks:
            _install()
        _sinks.append(entry)
    try:
        yield records
    finally:
        with _lock:
            del _sinks[next(i for i, e in enumerate(_sinks) if e is entry)]
            if not _sinks:
                _uninstall()
