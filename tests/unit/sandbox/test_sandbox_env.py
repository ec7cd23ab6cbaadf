"""The sandbox child's environment: basics and node switches kept, everything else dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.sandbox import SandboxLimits
from kernelband.sandbox.limits import scrubbed_env

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def test_multicast_switches_and_device_choice_reach_the_child(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A multi-GPU node that turns NVLink multicast off for every process keeps it off in the
    kernels it measures, on the GPU the worker was given."""
    for name, value in {**MULTICAST_OFF, "CUDA_VISIBLE_DEVICES": "3",
                        "KERNELBAND_API_TOKEN": "kb_secret", "OTHER_SETTING": "x"}.items():
        monkeypatch.setenv(name, value)
    env = scrubbed_env(SandboxLimits(), str(tmp_path))
    assert {name: env.get(name) for name in MULTICAST_OFF} == MULTICAST_OFF
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert "KERNELBAND_API_TOKEN" not in env and "OTHER_SETTING" not in env
