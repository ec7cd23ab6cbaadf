import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    total = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        total += tl.sum(tl.load(x_row + cols, mask=cols < n_cols, other=0.0), axis=0)
    mean = total / n_cols
    var_sum = 0.0
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0)
        diff = tl.where(cols < n_cols, x - mean, 0.0)
        var_sum += tl.sum(diff * diff, axis=0)
    rstd = 1.0 / tl.sqrt(var_sum / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(out_ptr + row * stride + cols, (x - mean) * rstd * w + b, mask=mask)


def layer_norm(x, weight, bias, eps=1e-5):
    rows, cols = x.shape
    out = torch.empty_like(x)
    layer_norm_kernel[(rows,)](x, weight, bias, out, cols, x.stride(0), eps, BLOCK_N=16, num_warps=4)
    return out


##################################################################################################################################################


def test_layer_norm():
    results = {}
    for i, (rows, cols) in enumerate([(8, 64), (4, 100), (6, 33)]):
        x = torch.randn(rows, cols, device="cuda")
        w = torch.randn(cols, device="cuda")
        b = torch.randn(cols, device="cuda")
        results[f"test_case_{i + 1}"] = layer_norm(x, w, b)
    return results
