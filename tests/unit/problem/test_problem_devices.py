"""device_scope sends cuda placements to the CPU and restores torch.cuda afterwards."""

from __future__ import annotations

import pytest
import torch

from kernelband.problem.devices import device_scope, is_gpu_device


def test_factory_and_tensor_placements_are_remapped() -> None:
    with device_scope("cpu"):
        a = torch.zeros(3, device="cuda")
        b = torch.ones(2, device=torch.device("cuda:0"))
        c = torch.arange(4).cuda()
        d = torch.arange(4).to("cuda")
        e = torch.arange(4).to(device="cuda", dtype=torch.float16)
        assert a.is_cuda
    assert {t.device.type for t in (a, b, c, d, e)} == {"cpu"}
    assert e.dtype == torch.float16
    assert not a.is_cuda


def test_cuda_calls_are_harmless_inside_and_restored_after() -> None:
    original = torch.cuda.synchronize
    with device_scope("cpu"):
        torch.cuda.synchronize()
        with torch.cuda.device(0):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            end.record()
        assert end.elapsed_time(start) <= 0.0 <= start.elapsed_time(end)
    assert torch.cuda.synchronize is original


def test_gpu_device_without_gpu_is_a_clear_error() -> None:
    assert is_gpu_device("cuda:1") and not is_gpu_device("cpu")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(RuntimeError, match="no usable GPU"), device_scope("cuda"):
        pass


def test_capability_checks_take_the_gpu_path() -> None:
    with device_scope("cpu"):
        assert torch.cuda.get_device_capability()[0] >= 8
        assert torch.cuda.device_count() == 1
