"""RMSNorm over the last dimension: out = x / sqrt(mean(x^2) + eps) * weight."""

import torch
import triton
import triton.language as tl

# kernelband: editable begin
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride_x, stride_out, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    sum_sq = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        sum_sq += tl.sum(x * x, axis=0)
    rstd = 1.0 / tl.sqrt(sum_sq / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def entry(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](
        x, weight, out, n_cols, x.stride(0), out.stride(0), eps,
        BLOCK_N=16, num_warps=4, num_stages=1,
    )
    return out
# kernelband: editable end


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def make_inputs(case, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    rows, cols = case.params["rows"], case.params["cols"]
    x = torch.randn(rows, cols, generator=gen).to(device=device, dtype=dtype)
    weight = (1.0 + 0.1 * torch.randn(cols, generator=gen)).to(device=device, dtype=dtype)
    return [x, weight, 1e-6]


CASES = [
    {"name": "r32_c128", "params": {"rows": 32, "cols": 128}, "dtype": "float32"},
    {"name": "r16_c96", "params": {"rows": 16, "cols": 96}, "dtype": "float16"},
]
HELD_OUT_CASES = [
    {"name": "r9_c200", "params": {"rows": 9, "cols": 200}, "dtype": "float32"},
]
