"""Fused SwiGLU activation: out = silu(gate) * up, in one pass over memory."""

import torch
import triton
import triton.language as tl

# kernelband: editable begin
@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    g = tl.load(gate_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    out = g * tl.sigmoid(g) * u
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def entry(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(gate)
    n = gate.numel()
    grid = (triton.cdiv(n, 64),)
    swiglu_kernel[grid](gate, up, out, n, BLOCK_SIZE=64, num_warps=4, num_stages=1)
    return out
# kernelband: editable end


def reference(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.silu(gate.float()) * up.float()).to(gate.dtype)


def make_inputs(case, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    rows, cols = case.params["rows"], case.params["cols"]
    gate = torch.randn(rows, cols, generator=gen).to(device=device, dtype=dtype)
    up = torch.randn(rows, cols, generator=gen).to(device=device, dtype=dtype)
    return [gate, up]


CASES = [
    {"name": "r32_c256", "params": {"rows": 32, "cols": 256}, "dtype": "float32"},
    {"name": "r16_c512_fp16", "params": {"rows": 16, "cols": 512}, "dtype": "float16"},
]
HELD_OUT_CASES = [
    {"name": "r11_c301", "params": {"rows": 11, "cols": 301}, "dtype": "float32"},
]
