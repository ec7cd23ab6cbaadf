"""The cost model orders obvious pairs and labels every figure as an estimate."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import torch

from kernelband.profile.archs import GPUS, resolve_target
from kernelband.profile.estimate import CaseEstimate, dot_flops, estimate_case
from kernelband.profile.launches import capture_launches
from kernelband.profile.static import static_profile

N = 1 << 22


def estimated(launch: Callable[[], Any], target: str = "h100") -> CaseEstimate:
    gpu = GPUS[target]
    with capture_launches(execute=False) as records:
        launch()
    return estimate_case([(r, static_profile(r, gpu.cc)) for r in records], gpu)


@pytest.fixture(scope="module")
def data() -> torch.Tensor:
    return torch.randn(N + 1)


@pytest.mark.parametrize("target", ["h100", "a100", "rtx4090"])
def test_vectorised_loads_beat_scalar_loads(kernels: ModuleType, data: torch.Tensor, target: str) -> None:
    vector = estimated(lambda: kernels.add(data[:N], data[:N], 1024, 4), target)
    scalar = estimated(lambda: kernels.add(data[1:], data[1:], 1024, 4), target)
    assert vector.time_ms < scalar.time_ms
    assert vector.launches[0].load_bits == 128 and scalar.launches[0].load_bits < 64


@pytest.mark.parametrize("target", ["h100", "rtx4090"])
def test_far_too_small_blocks_lose_to_sane_blocks(kernels: ModuleType, data: torch.Tensor, target: str) -> None:
    tiny = estimated(lambda: kernels.add(data[:N], data[:N], 32, 4), target)
    sane = estimated(lambda: kernels.add(data[:N], data[:N], 1024, 4), target)
    assert tiny.time_ms > 1.5 * sane.time_ms
    assert tiny.launches[0].waves > sane.launches[0].waves


def test_faster_gpu_gets_a_smaller_estimate_for_memory_bound_work(kernels: ModuleType, data: torch.Tensor) -> None:
    h200 = estimated(lambda: kernels.add(data[:N], data[:N]), "h200")
    h100 = estimated(lambda: kernels.add(data[:N], data[:N]), "h100")
    a100 = estimated(lambda: kernels.add(data[:N], data[:N]), "a100")
    assert h200.time_ms < h100.time_ms < a100.time_ms
    assert h100.launches[0].limiter == "memory"


def test_matmul_estimate_counts_the_product_flops(kernels: ModuleType) -> None:
    a, b = torch.randn(512, 256).half(), torch.randn(256, 1024).half()
    with capture_launches(execute=False) as records:
        kernels.matmul(a, b, 64, 64, 32, 4, 3)
    assert dot_flops(records[0]) == pytest.approx(2.0 * 512 * 1024 * 256)
    estimate = estimated(lambda: kernels.matmul(a, b, 64, 64, 32, 4, 3))
    assert estimate.launches[0].flops >= 2.0 * 512 * 1024 * 256


def test_every_estimate_is_labelled(kernels: ModuleType, data: torch.Tensor) -> None:
    estimate = estimated(lambda: kernels.add(data[:N], data[:N]))
    assert estimate.label == "estimated" and estimate.to_dict()["label"] == "estimated"
    assert all(e.label == "estimated" for e in estimate.launches)
    assert 0 < estimate.launches[0].dram_pct <= 100


def test_cpu_target_estimates_for_the_reference_gpu() -> None:
    assert resolve_target("cpu") is GPUS["h100"]
    assert resolve_target("cpu", "a100") is GPUS["a100"]
    from kernelband.profile import UnknownTargetError

    with pytest.raises(UnknownTargetError, match="use one of"):
        resolve_target("v100")
