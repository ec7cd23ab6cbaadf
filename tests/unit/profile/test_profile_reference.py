"""The PyTorch reference of a KernelBench file as published: its labelled eager roofline."""

from __future__ import annotations

import pytest
import torch

from kernelband.profile import measure_candidate
from kernelband.profile.archs import resolve_target
from kernelband.profile.estimate import LAUNCH_OVERHEAD_US
from kernelband.profile.reference import TorchOps, op_time_ms
from kernelband.sandbox import load_problem_sandboxed

PUBLISHED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b)).view(-1)


M, K, N = 64, 128, 32


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
"""


def test_ops_that_write_data_are_counted_and_views_are_free() -> None:
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    with TorchOps() as ops:
        torch.relu(torch.matmul(a, b)).view(-1)
    names = [name for name, *_ in ops.ops]
    assert names == ["matmul", "relu"]
    _, moved, flops, half = ops.ops[0]
    assert flops == 2 * 64 * 32 * 128 and moved == 4 * (64 * 128 + 128 * 32 + 64 * 32)
    assert half is False


def test_an_operator_costs_a_launch_plus_its_roofline() -> None:
    gpu = resolve_target("h100")
    small = op_time_ms(4, 1.0, False, "relu", gpu)
    assert small == pytest.approx(LAUNCH_OVERHEAD_US * 1e-3, rel=1e-3)
    big = op_time_ms(10**9, 1.0, False, "relu", gpu)
    assert big == pytest.approx(LAUNCH_OVERHEAD_US * 1e-3 + 1e9 / (gpu.dram_gbps * 1e9) * 1e3)


def test_the_placeholder_baseline_is_a_labelled_estimate() -> None:
    problem = load_problem_sandboxed(PUBLISHED, "kernelbench", "mm_relu")
    measurement, features = measure_candidate(problem, None, "cpu")
    assert measurement.label == "estimated" and "PyTorch eager roofline" in measurement.method
    assert measurement.time_ms > 2 * LAUNCH_OVERHEAD_US * 1e-3  # two launches at least
    assert features.phi_sources[1:] == ("none",) * 4 and "PyTorch reference" in features.h_note
