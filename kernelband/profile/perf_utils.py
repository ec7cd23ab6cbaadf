"""`performance_utils` as a TritonBench-G performance harness imports it.

A harness subclasses `Performance_Metrics` and implements `get_input_tensors()`, `to_cuda()`
and `call_op()`; the service builds the inputs and times `call_op` itself
(kernelband/profile/perf_harness.py). `get_runtime` times with `triton.testing.do_bench` as
TritonBench's own harness does (bench/gpu/corpus_gpu.py compares the two).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class do_bench_config:  # noqa: N801 - the name harnesses import
    """do_bench settings (TritonBench's defaults)."""

    def __init__(self, warm_up: int = 25, repetition: int = 100, grad_to_none: Any = None,
                 quantiles: list[float] | None = None, return_mode: str = "median") -> None:
        self.warm_up, self.repetition, self.grad_to_none = warm_up, repetition, grad_to_none
        self.quantiles = quantiles if quantiles is not None else [0.5, 0.8, 0.2]
        self.return_mode = return_mode


class Performance_Metrics:  # noqa: N801 - the name harnesses import
    """Base class of a harness: inputs, their device copies, the timed call."""

    def __init__(self, op_name: str, dtype: Any = None, is_backward: bool = False,
                 **kwargs: Any) -> None:
        self.op_name = op_name + ("backward" if is_backward else "")
        self.dtype, self.kwargs = dtype, kwargs
        self.input_tensors: list[Any] = []
        self.do_bench_config = do_bench_config()

    def get_input_tensors(self) -> None:
        raise NotImplementedError("Must provide get_input_tensors() filling self.input_tensors")

    def to_cuda(self, input_tensor: Any) -> Any:
        raise NotImplementedError("Must provide to_cuda(input_tensor)")

    def call_op(self, input_tensor: Any) -> Any:
        raise NotImplementedError("Must provide call_op(input_tensor)")

    def get_do_bench_config(self, warmup: int | None = None, rep: int | None = None) -> None:
        if warmup is not None and rep is not None:
            self.do_bench_config = do_bench_config(warm_up=warmup, repetition=rep)

    def get_runtime(self, op: Callable[[], Any]) -> float:
        """Median ms of `op` by `triton.testing.do_bench` (TritonBench's method)."""
        import triton.testing

        cfg = self.do_bench_config
        result = triton.testing.do_bench(op, warmup=cfg.warm_up, rep=cfg.repetition,
                                         quantiles=cfg.quantiles, return_mode=cfg.return_mode)
        return float(result[0] if isinstance(result, list | tuple) else result)

    def get_gbps(self, input_tensor: Any, runtime: float) -> float:
        return 0.0

    def get_tflops(self, input_tensor: Any, runtime: float) -> float:
        return 0.0
