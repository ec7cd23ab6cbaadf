"""Run problems written for `cuda` on the CPU (under TRITON_INTERPRET=1) without editing them.

`device_scope(device)` is a context manager. On a real GPU (`device` starts with "cuda") it does
nothing. Otherwise it rewrites every `cuda` device a torch call asks for (factory `device=`
keywords, `Tensor.cuda()`, `Tensor.to("cuda")`) to `device`, reports tensors as `is_cuda`, and
turns the `torch.cuda` calls that CPU-only torch refuses (synchronize, device guards, ...) into
harmless stand-ins for the duration of the scope.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelband.problem import interpreter_compat
from kernelband.problem.interpreter_driver import (
    CAPABILITY,
    DEVICE_NAME,
    interpreter_driver,
    torch_device_properties,
)


def is_gpu_device(device: str) -> bool:
    """True when `device` names a CUDA device (nothing is remapped then)."""
    return device.startswith("cuda")


_INTERPRET = "TRITON_INTERPRET"
_UNSET = object()
# The value TRITON_INTERPRET had before `use_interpreter_for` first set it (None: absent), or
# _UNSET while this module has not changed it; lets a later GPU request undo only our change.
_saved_interpret: list[object] = [_UNSET]


def use_interpreter_for(device: str) -> None:
    """Make Triton kernels decorated from now on run in the interpreter on a CPU device and be
    compiled on a GPU device (undoing an earlier CPU request in this process)."""
    if not is_gpu_device(device):
        if _saved_interpret[0] is _UNSET:
            _saved_interpret[0] = os.environ.get(_INTERPRET)
        # triton reads TRITON_INTERPRET when a kernel is decorated, so set it before user imports.
        os.environ[_INTERPRET] = "1"
        interpreter_compat.install()
    else:
        restore_interpreter_env()


def restore_interpreter_env() -> None:
    """Put TRITON_INTERPRET back as it was before `use_interpreter_for` changed it (a value set
    by the caller's environment, e.g. the sandbox's CPU children, is left alone)."""
    previous = _saved_interpret[0]
    if previous is _UNSET:
        return
    _saved_interpret[0] = _UNSET
    if previous is None:
        os.environ.pop(_INTERPRET, None)
    else:
        os.environ[_INTERPRET] = str(previous)


@contextlib.contextmanager
def interpreter_scope(device: str) -> Iterator[None]:
    """`use_interpreter_for(device)` for the duration of the block: kernels decorated (imported)
    inside it keep their mode, and TRITON_INTERPRET is as before once the block exits."""
    previous_env, previous_saved = os.environ.get(_INTERPRET), _saved_interpret[0]
    try:
        use_interpreter_for(device)
        yield
    finally:
        _saved_interpret[0] = previous_saved
        if previous_env is None:
            os.environ.pop(_INTERPRET, None)
        else:
            os.environ[_INTERPRET] = previous_env


def _is_cuda_spec(value: Any) -> bool:
    if isinstance(value, torch.device):
        return value.type == "cuda"
    return isinstance(value, str) and value.split(":")[0] == "cuda"


def _remap_value(value: Any, target: str) -> Any:
    return target if _is_cuda_spec(value) else value


class CudaToDevice(TorchFunctionMode):
    """A torch function mode that sends every `cuda` placement to `target`."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0].to(self.target)
        if getattr(func, "__self__", None) is torch.Tensor.is_cuda:
            # user code often asserts `x.is_cuda`; the remapped tensors stand in for cuda ones
            return True
        if "device" in kwargs:
            kwargs["device"] = _remap_value(kwargs["device"], self.target)
        if func is torch.Tensor.to:
            args = tuple(_remap_value(a, self.target) for a in args)
        return func(*args, **kwargs)


class _NoOpDeviceGuard:
    """Stands in for `torch.cuda.device(...)`, which CPU-only torch refuses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> _NoOpDeviceGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _WallClockEvent:
    """Stands in for `torch.cuda.Event(enable_timing=True)` using the host clock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stamp = 0.0

    def record(self, *args: Any, **kwargs: Any) -> None:
        self.stamp = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: _WallClockEvent) -> float:
        return (end.stamp - self.stamp) * 1000.0


class _PhiloxGenerator:
    """Stands in for a CUDA generator (`torch.cuda.default_generators[i]`): like CUDA's, its
    state is 16 bytes, the seed and a Philox offset (what Triton wrappers read to seed
    `tl.philox`); the seed is torch's CPU seed, so `torch.manual_seed` reseeds it."""

    def __init__(self) -> None:
        self.offset = 0

    def initial_seed(self) -> int:
        return int(torch.initial_seed())

    def manual_seed(self, seed: int) -> _PhiloxGenerator:
        torch.manual_seed(seed)
        self.offset = 0
        return self

    def seed(self) -> int:
        self.offset = 0
        return int(torch.seed())

    def get_state(self) -> torch.Tensor:
        return torch.tensor([self.initial_seed(), self.offset], dtype=torch.int64).view(torch.uint8)

    def set_state(self, state: torch.Tensor) -> None:
        self.offset = int(state.view(torch.int64)[1])

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.offset = int(offset)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", 0)


def _no_op(name: str) -> Callable[..., None]:
    """A distinct do-nothing function per name (torch._dynamo refuses one object twice)."""

    def no_op(*args: Any, **kwargs: Any) -> None:
        return None

    no_op.__name__ = no_op.__qualname__ = name
    return no_op


_CUDA_STAND_INS: dict[str, Any] = {
    "synchronize": _no_op("synchronize"),
    "empty_cache": _no_op("empty_cache"),
    "set_device": _no_op("set_device"),
    "reset_peak_memory_stats": _no_op("reset_peak_memory_stats"),
    "current_device": lambda: 0,
    "device_count": lambda: 1,
    # an Ampere-like answer keeps capability checks on their GPU code path, which is remapped
    "get_device_capability": lambda *args, **kwargs: CAPABILITY,
    "get_device_name": lambda *args, **kwargs: DEVICE_NAME,
    "device": _NoOpDeviceGuard,
    "_DeviceGuard": _NoOpDeviceGuard,
    "Event": _WallClockEvent,
    "get_device_properties": torch_device_properties,
}


def _empty_strided_stand_in(size: Any, stride: Any, dtype: Any) -> torch.Tensor:
    """`torch._C._dynamo.guards._empty_strided_cuda` on the CPU (zero-filled)."""
    return torch.zeros_strided(size, stride, dtype=dtype) if hasattr(torch, "zeros_strided") \
        else torch.empty_strided(size, stride, dtype=dtype).zero_()


@contextlib.contextmanager
def _patched_cuda_module() -> Iterator[None]:
    stand_ins = {**_CUDA_STAND_INS, "default_generators": (_PhiloxGenerator(),)}
    saved = {name: getattr(torch.cuda, name) for name in stand_ins}
    # `from torch._C import _cuda_getCurrentRawStream` (the raw stream of Inductor-style wrappers)
    raw_stream = "_cuda_getCurrentRawStream"
    had_raw_stream = hasattr(torch._C, raw_stream)
    # Inductor-generated wrappers allocate with a C helper that no torch function mode sees
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    saved_strided = getattr(guards, "_empty_strided_cuda", None)
    try:
        if saved_strided is not None:
            guards._empty_strided_cuda = _empty_strided_stand_in  # type: ignore[union-attr]
        for name, stand_in in stand_ins.items():
            setattr(torch.cuda, name, stand_in)
        if not had_raw_stream:
            setattr(torch._C, raw_stream, lambda *args: 0)
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
        if not had_raw_stream:
            delattr(torch._C, raw_stream)
        if saved_strided is not None:
            guards._empty_strided_cuda = saved_strided  # type: ignore[union-attr]


@contextlib.contextmanager
def device_scope(device: str) -> Iterator[None]:
    """Inside this scope, code written for `cuda` runs on `device` (no-op on a real GPU)."""
    if is_gpu_device(device):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device {device!r} was requested but this machine has no usable GPU; "
                "run on a GPU node or ask for device 'cpu' (Triton interpreter)"
            )
        yield
        return
    with _patched_cuda_module(), interpreter_driver(), CudaToDevice(device):
        yield
