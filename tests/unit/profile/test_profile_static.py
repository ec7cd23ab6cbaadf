"""Static profiles of small kernels for sm_80, sm_89 and sm_90, compiled ahead of time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kernelband.profile.archs import ARCH_LIMITS
from kernelband.profile.launches import LaunchRecord, capture_launches
from kernelband.profile.occupancy import theoretical_occupancy
from kernelband.profile.static import StaticProfile, clear_memory_cache, static_profile

ARCHS = (80, 89, 90)
N = 1 << 20


def dry(launch: Callable[[], Any]) -> LaunchRecord:
    with capture_launches(execute=False) as records:
        launch()
    return records[0]


@pytest.fixture(scope="module")
def data() -> torch.Tensor:
    return torch.randn(N + 1)


def profile(record: LaunchRecord, cc: int) -> StaticProfile:
    return static_profile(record, cc)


@pytest.mark.parametrize("cc", ARCHS)
def test_vectorised_add_profile(kernels: ModuleType, data: torch.Tensor, cc: int) -> None:
    p = profile(dry(lambda: kernels.add(data[:N], data[:N], 1024, 4)), cc)
    assert (p.arch, p.num_warps, p.threads_per_block, p.num_stages) == (f"sm_{cc}", 4, 128, 3)
    assert p.shared_mem_bytes == 0 and p.local_bytes == 0 and p.spill_instructions == 0
    assert 10 <= p.registers_per_thread <= 40
    # 1024 fp32 per block over 128 threads: 8 per thread = two 128-bit loads per input.
    assert p.sass["LDG.128"] == 4 and p.sass["STG.128"] == 2 and "LDG.32" not in p.sass
    assert p.sass["FADD"] == 8
    assert p.occupancy.occupancy_pct == 100.0 and p.occupancy.limiter == "warps"
    assert p.label == "static"


@pytest.mark.parametrize("cc", ARCHS)
def test_misaligned_pointers_fall_back_to_scalar_loads(kernels: ModuleType, data: torch.Tensor, cc: int) -> None:
    p = profile(dry(lambda: kernels.add(data[1:], data[1:], 1024, 4)), cc)
    assert p.signature["x_ptr"] == "*fp32"
    assert p.sass.get("LDG.128", 0) == 0 and p.sass["LDG.32"] == 16


@pytest.mark.parametrize("cc", ARCHS)
def test_block_size_and_warps_change_registers_widths_and_occupancy(
    kernels: ModuleType, data: torch.Tensor, cc: int
) -> None:
    base = profile(dry(lambda: kernels.add(data[:N], data[:N], 1024, 4)), cc)
    big = profile(dry(lambda: kernels.add(data[:N], data[:N], 4096, 4)), cc)
    huge = profile(dry(lambda: kernels.add(data[:N], data[:N], 16384, 4)), cc)
    wide = profile(dry(lambda: kernels.add(data[:N], data[:N], 1024, 8)), cc)
    assert base.registers_per_thread < big.registers_per_thread < huge.registers_per_thread
    assert big.sass["LDG.128"] == 4 * base.sass["LDG.128"]
    assert huge.occupancy.limiter == "registers" and huge.occupancy.occupancy_pct <= 25.0
    assert big.occupancy.occupancy_pct < 100.0
    assert wide.threads_per_block == 256 and wide.sass["LDG.128"] == 2


@pytest.mark.parametrize("cc", ARCHS)
def test_matmul_uses_tensor_cores_and_stages_cost_shared_memory(kernels: ModuleType, cc: int) -> None:
    a, b = torch.randn(256, 256).half(), torch.randn(256, 256).half()
    two = profile(dry(lambda: kernels.matmul(a, b, 64, 64, 32, 4, 2)), cc)
    four = profile(dry(lambda: kernels.matmul(a, b, 64, 64, 32, 4, 4)), cc)
    tensor_op = "WGMMA" if cc == 90 else "HMMA"
    assert two.sass.get(tensor_op, 0) > 0
    assert 0 < two.shared_mem_bytes < four.shared_mem_bytes
    for p in (two, four):
        expected = theoretical_occupancy(ARCH_LIMITS[cc], 4, p.registers_per_thread, p.shared_mem_bytes)
        assert p.occupancy == expected


def test_interpreter_kernels_with_library_helpers_compile(kernels: ModuleType) -> None:
    x = torch.randn(4, 300)
    with capture_launches() as records:
        out = kernels.softmax(x, block=512)
    assert torch.allclose(out, torch.softmax(x, dim=1), atol=1e-5)
    p = profile(records[0], 90)
    assert p.sass.get("SHFL", 0) > 0 and p.sass.get("MUFU", 0) > 0  # warp reductions, exp
    again = kernels.softmax(x, block=512)  # the interpreter still works after compiling
    assert torch.allclose(again, out)


def test_profiles_are_cached_in_memory_and_on_disk(
        kernels: ModuleType, data: torch.Tensor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import static

    record = dry(lambda: kernels.add(data[:N], data[:N], 2048, 4))
    first = static_profile(record, 89, tmp_path)
    assert not first.cached and len(list(tmp_path.glob("*.json"))) == 1
    compiles: list[int] = []
    real_compile = static._compile
    monkeypatch.setattr(static, "_compile", lambda r, cc: compiles.append(cc) or real_compile(r, cc))
    second = static_profile(record, 89, tmp_path)
    assert second.cached and compiles == []  # answered from memory, nothing compiled
    clear_memory_cache()
    from_disk = static_profile(record, 89, tmp_path)
    assert from_disk.cached and from_disk.registers_per_thread == first.registers_per_thread
    assert compiles == []  # answered from the JSON on disk
    other_arch = static_profile(record, 80, tmp_path)
    assert not other_arch.cached and compiles == [80]


def test_unknown_architecture_is_refused(kernels: ModuleType, data: torch.Tensor) -> None:
    from kernelband.profile import StaticProfileError

    with pytest.raises(StaticProfileError, match="sm_75"):
        static_profile(dry(lambda: kernels.add(data[:N], data[:N])), 75)


@pytest.mark.parametrize("cc", (89, 90))
def test_a_tensor_reinterpreted_as_a_triton_dtype_keeps_that_dtype(kernels: ModuleType, cc: int) -> None:
    raw = torch.zeros(N, dtype=torch.uint8)
    p = profile(dry(lambda: kernels.fp8_upcast(raw)), cc)
    assert p.signature["x_ptr"] == "*fp8e5" and p.signature["out_ptr"] == "*fp16"


class _StandInDriver:
    """Triton's active driver as a GPU node's would answer for an sm_90 device, so a launch's
    own compile path can run here without one (`warmup`: compile, never launch)."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")


def test_a_static_profiles_compile_is_the_one_a_runners_launch_finds_in_the_cache(
        kernels: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.driver import driver

    from kernelband.profile.specialize import as_jit_function, deinterpreted

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    odd = torch.randn(4001)  # its length gets no divisibility attribute: listed without one
    record = dry(lambda: kernels.add(odd, odd, 512, 4))
    clear_memory_cache()
    static_profile(record, 90, tmp_path / "static")
    compiled = set((tmp_path / "triton").iterdir())
    assert compiled
    jit = as_jit_function(record.fn)
    monkeypatch.setattr(driver, "_active", _StandInDriver())
    with deinterpreted():
        jit.warmup(*record.args.values(), grid=record.grid, num_warps=record.num_warps, num_stages=record.num_stages)
    assert set((tmp_path / "triton").iterdir()) == compiled  # found, not compiled again
