"""The CPU interpreter runs what a GPU build accepts: driver queries, autotune, block pointers,
element-wise `and` masks, list grids and string constexpr annotations."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch
from problem_testkit import kernel_module

from kernelband.problem.devices import device_scope, use_interpreter_for

KERNELS = '''
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def tuned_copy(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def block_copy(x, out, M, N, sm, sn, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_block_ptr(x, (M, N), (sm, sn), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out, (M, N), (sm, sn), (tl.program_id(0) * BM, 0), (BM, BN), (1, 0))
    for _ in range(0, N, BN):
        tile = tl.load(src, boundary_check=(0, 1), padding_option="zero")
        tl.store(dst, tile.to(dst.dtype.element_ty) * 2, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


@triton.jit
def and_mask_copy(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    mask = rows < M and cols < N
    tl.store(out + rows * N + cols, tl.load(x + rows * N + cols, mask=mask), mask=mask)


@triton.jit
def string_constexpr(x, out, n, BLOCK: "tl.constexpr"):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)


class RawBuffer:
    """A tensor-like buffer with only data_ptr() and dtype (as FlagGems' StridedBuffer)."""

    def __init__(self, base, offset):
        self.base, self.dtype, self.device = base, base.dtype, base.device
        self.ptr = base.data_ptr() + offset * base.element_size()

    def data_ptr(self):
        return self.ptr


def add_one_raw(x, out, offset):
    n = x.numel() - offset
    string_constexpr[(1,)](RawBuffer(x, offset), RawBuffer(out, offset), n, BLOCK=64)


def sm_count():
    return torch.cuda.get_device_properties("cuda").multi_processor_count


def target_arch():
    return triton.runtime.driver.active.get_current_target().arch
'''


def _module(tmp_path: Path) -> ModuleType:
    use_interpreter_for("cpu")
    return kernel_module(KERNELS, "interp_kernels", tmp_path)


def test_driver_queries_answer_as_an_ampere_gpu(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    with device_scope("cpu"):
        assert mod.sm_count() == 108
        assert mod.target_arch() == 80


def test_autotuned_kernel_runs_without_benchmarking(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    with device_scope("cpu"):
        x = torch.randn(100, device="cuda")
        out = torch.empty_like(x)
        mod.tuned_copy[lambda meta: (triton_cdiv(100, meta["BLOCK"]),)](x, out, 100)
    assert torch.equal(out, x)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_block_pointers_are_emulated_with_bounds(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    x = torch.randn(37, 45)
    out = torch.zeros_like(x)
    with device_scope("cpu"):
        mod.block_copy[(triton_cdiv(37, 16),)](x, out, 37, 45, x.stride(0), x.stride(1), BM=16, BN=16)
    assert torch.equal(out, x * 2)


def test_python_and_on_blocks_is_element_wise(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    x = torch.randn(5, 7)
    out = torch.zeros(16 * 7 + 16)  # room for the unmasked rows a lost half would write
    with device_scope("cpu"):
        mod.and_mask_copy[[1]](x, out, 5, 7, BM=16, BN=8)  # a list grid, as GPU Triton accepts
    assert torch.equal(out[:35], x.reshape(-1)) and not out[35:].any()


def test_string_constexpr_annotation_is_constexpr(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    x = torch.randn(10)
    out = torch.zeros(10)
    with device_scope("cpu"):
        mod.string_constexpr[(1,)](x, out, 10, BLOCK=16)
    assert torch.equal(out, x + 1)


def test_raw_pointer_arguments_are_passed_by_pointer(tmp_path: Path) -> None:
    mod = _module(tmp_path)
    x = torch.randn(20)
    out = torch.zeros(20)
    with device_scope("cpu"):
        mod.add_one_raw(x, out, 5)  # kernel arguments that are not tensors, at an offset
    assert torch.equal(out[5:], x[5:] + 1) and not out[:5].any()
