"""Answers to GPU driver queries for kernels run by the CPU Triton interpreter.

CPU-only Triton has no active driver, so `triton.runtime.driver.active` (used by
`@triton.autotune` and by wrappers that ask for the SM count or the target) raises
"0 active drivers". `InterpreterDriver` answers those queries as an Ampere-class GPU (the same
answer as the `torch.cuda.get_device_capability` stand-in: compute capability 8.0), so a kernel
written for a GPU keeps its GPU code path and runs in the interpreter.

Autotuning does not benchmark here: interpreter times say nothing about a GPU, so every config
ties and the autotuner keeps its first config (a GPU run tunes for real).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

# An A100-like device (compute capability 8.0), as Triton's CUDA driver reports one.
DEVICE_PROPERTIES: dict[str, int] = {
    "multiprocessor_count": 108,
    "max_shared_mem": 166912,
    "max_num_regs": 65536,
    "warpSize": 32,
    "sm_clock_rate": 1410000,
    "mem_clock_rate": 1215000,
    "mem_bus_width": 5120,
}
CAPABILITY = (8, 0)
DEVICE_NAME = "cpu (Triton interpreter, answering as an Ampere-class GPU)"


def torch_device_properties(*args: Any, **kwargs: Any) -> SimpleNamespace:
    """Stands in for `torch.cuda.get_device_properties(device)`."""
    return SimpleNamespace(
        name=DEVICE_NAME, major=CAPABILITY[0], minor=CAPABILITY[1],
        multi_processor_count=DEVICE_PROPERTIES["multiprocessor_count"],
        total_memory=40 * 1024**3, L2_cache_size=40 * 1024**2,
        shared_memory_per_block=48 * 1024,
        shared_memory_per_block_optin=DEVICE_PROPERTIES["max_shared_mem"],
        shared_memory_per_multiprocessor=DEVICE_PROPERTIES["max_shared_mem"] + 1024,
        regs_per_multiprocessor=DEVICE_PROPERTIES["max_num_regs"],
        max_threads_per_multi_processor=2048, warp_size=DEVICE_PROPERTIES["warpSize"],
        gcnArchName="", is_integrated=False, is_multi_gpu_board=False,
    )


def untimed_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **kwargs: Any) -> Any:
    """The interpreter's benchmarker: runs nothing, every config gets the same time."""
    if quantiles is None:
        return 1.0
    return [1.0 for _ in quantiles]


class _Utils:
    """`driver.active.utils`: device properties."""

    def get_device_properties(self, device: Any = 0) -> dict[str, int]:
        return dict(DEVICE_PROPERTIES)


class InterpreterDriver:
    """Stands in for `triton.runtime.driver.active` while kernels run in the interpreter."""

    backend = "cuda"

    def __init__(self) -> None:
        self.utils = _Utils()

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", CAPABILITY[0] * 10 + CAPABILITY[1], 32)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: Any) -> None:
        return None

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_device_capability(self, device: Any = 0) -> tuple[int, int]:
        return CAPABILITY

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda  # the device scope has replaced the calls CPU torch refuses

    def get_benchmarker(self) -> Callable[..., Any]:
        return untimed_bench

    def get_empty_cache_for_benchmark(self) -> Any:
        import torch

        return torch.empty(0)

    def clear_cache(self, cache: Any) -> None:
        return None

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"triton.runtime.driver.active.{name} is not available in the CPU Triton interpreter; "
            "run this problem on a GPU target (h100, a100, rtx4090)"
        )


@contextlib.contextmanager
def interpreter_driver() -> Iterator[None]:
    """`triton.runtime.driver.active` answers as `InterpreterDriver` inside the block."""
    try:
        from triton.runtime.driver import driver
    except ImportError:  # no triton: nothing asks the driver
        yield
        return
    saved = dict(vars(driver))
    try:
        driver.set_active(InterpreterDriver())  # type: ignore[arg-type]
        yield
    finally:
        vars(driver).clear()
        vars(driver).update(saved)
