# expect: background_thread
# static: off
# Returns at once and lets a background thread fill the result (a timer would see nothing).
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


import threading


def entry(x, y):
    out = torch.empty_like(x)
    threading.Thread(target=_add, args=(x, y, out)).start()
    return out
