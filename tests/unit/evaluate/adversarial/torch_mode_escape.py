# expect: forbidden_attribute
# static: on
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


def entry(x, y):
    scratch = torch.empty(1, device=x.device, dtype=x.dtype)
    add_kernel[(1,)](x, y, scratch, 1, BLOCK_SIZE=16)
    with torch._C.DisableTorchFunction():  # hide the torch work from the checker
        return torch.add(x, y)
