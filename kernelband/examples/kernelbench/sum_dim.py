import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    """Sum over dimension 1, keeping the dimension."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 4
dim1 = 48
dim2 = 20
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]


# kernelband: editable begin
@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, D1, D2, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0)
    pid_c = tl.program_id(1)
    cols = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, D1, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ptrs = x_ptr + b * D1 * D2 + rows[:, None] * D2 + cols[None, :]
        mask = (rows[:, None] < D1) & (cols[None, :] < D2)
        acc += tl.sum(tl.load(ptrs, mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + b * D2 + cols, acc, mask=cols < D2)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 3, "this kernel reduces dim 1 of a 3-D tensor"
        x = x.contiguous()
        B, D1, D2 = x.shape
        out = torch.empty((B, 1, D2), device=x.device, dtype=x.dtype)
        grid = (B, triton.cdiv(D2, 8))
        sum_dim1_kernel[grid](x, out, D1, D2, BLOCK_R=8, BLOCK_C=8, num_warps=2)
        return out
# kernelband: editable end
