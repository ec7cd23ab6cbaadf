"""The Triton share of GPU time: near one for a kernel, near zero for a decoy."""

from __future__ import annotations

import pytest

from kernelband.evaluate.gpu_share import share_of


def test_share_counts_kernels_named_after_the_launched_functions() -> None:
    times = {"add_kernel": 90.0, "elementwise_kernel<float>": 10.0}
    assert share_of(times, {"add_kernel"}) == pytest.approx(0.9)


def test_a_decoy_share_is_near_zero() -> None:
    times = {"add_kernel": 1.0, "ampere_sgemm_128x64_nn": 999.0}
    assert share_of(times, {"add_kernel"}) == pytest.approx(0.001)


def test_no_kernel_time_means_unknown() -> None:
    assert share_of({}, {"add_kernel"}) is None
