import torch
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full((BLOCK_N,), -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    tl.store(out_ptr + row, tl.max(acc, axis=0))


def row_max(x):
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=torch.float32)
    row_max_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK_N=16, num_warps=4)
    return out


##################################################################################################################################################


def test_row_max():
    results = {}
    results["test_case_1"] = row_max(torch.randn(16, 64, device="cuda"))
    results["test_case_2"] = row_max(torch.randn(8, 100, device="cuda"))
    results["test_case_3"] = row_max(torch.randn(5, 300, device="cuda", dtype=torch.float16))
    return results


HELD_OUT = ["test_case_2"]
result_gold = test_row_max()
