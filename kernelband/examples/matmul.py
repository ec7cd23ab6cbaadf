"""Matrix multiplication with tl.dot: C = A @ B (float32 accumulation).

TOLERANCES allow TF32: on Ampere and newer GPUs tl.dot on float32 inputs uses TF32 by default.
"""

import torch
import triton
import triton.language as tl

# kernelband: editable begin
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0,
        )
        acc += tl.dot(a, b)
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def entry(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 16, 16, 16
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4, num_stages=1,
    )
    return c
# kernelband: editable end


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def make_inputs(case, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    m, n, k = case.params["m"], case.params["n"], case.params["k"]
    a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
    return [a, b]


TOLERANCES = {"float32": (5e-2, 1e-2), "float16": (5e-2, 2e-2)}
CASES = [
    {"name": "m64_n64_k64", "params": {"m": 64, "n": 64, "k": 64}, "dtype": "float32"},
    {"name": "m32_n64_k32_fp16", "params": {"m": 32, "n": 64, "k": 32}, "dtype": "float16"},
]
HELD_OUT_CASES = [
    {"name": "m50_n70_k40", "params": {"m": 50, "n": 70, "k": 40}, "dtype": "float32"},
]
