# expect: wrong_result
# static: on
# Precision downgrade: adds in float16 inside the kernel and stores float32.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _add(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)
    return out


@triton.jit
def half_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float16)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float16)
    tl.store(out_ptr + offsets, (x + y).to(tl.float32), mask=mask)


def entry(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    half_add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128)
    return out
