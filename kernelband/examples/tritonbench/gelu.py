import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    # tanh approximation written with exp so it runs on every Triton version
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0
    y = 0.5 * x * (1.0 + tanh)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x):
    out = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, 32),)](x, out, n, BLOCK_SIZE=32, num_warps=4)
    return out


##################################################################################################################################################


def test_gelu():
    results = {}
    results["test_case_1"] = gelu(torch.randn(256, device="cuda"))
    results["test_case_2"] = gelu(torch.randn(1000, device="cuda"))
    results["test_case_3"] = gelu(torch.randn(17, 31, device="cuda"))
    results["test_case_4"] = gelu(torch.randn(512, device="cuda", dtype=torch.float16))
    results["test_case_5"] = gelu(torch.randn(300, device="cuda"))
    return results


result_gold = test_gelu()
