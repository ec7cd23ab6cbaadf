import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    """Softmax over dim 1."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 8
dim = 130


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


# Case params override the module constants above before get_inputs() runs.
CASES = [
    {"name": "b8_d130", "params": {}},
    {"name": "b16_d64", "params": {"batch_size": 16, "dim": 64}},
]
HELD_OUT_CASES = [{"name": "b5_d257", "params": {"batch_size": 5, "dim": 257}}]


# kernelband: editable begin
@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        m = tl.maximum(m, tl.max(x, axis=0))
    s = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
        tl.store(out_ptr + row * stride + cols, tl.exp(x - m) / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK_N=32, num_warps=4)
        return out
# kernelband: editable end
