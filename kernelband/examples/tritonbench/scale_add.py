import torch
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


def scale_add(x, y, alpha):
    assert x.is_cuda and y.is_cuda
    out = torch.empty_like(x)
    n = x.numel()
    with torch.cuda.device(x.device):
        scale_add_kernel[(triton.cdiv(n, 32),)](x, y, out, alpha, n, BLOCK_SIZE=32, num_warps=2)
    return out


##################################################################################################################################################


def test_scale_add():
    results = {}
    for i, n in enumerate([512, 1000, 2049]):
        x = torch.randn(n).cuda()
        y = torch.randn(n).to("cuda")
        results[f"test_case_{i + 1}"] = scale_add(x, y, 0.5)
    torch.cuda.synchronize()
    return results


result_gold = test_scale_add()
