import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


def relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK_SIZE=64, num_warps=4)
    return out


##################################################################################################################################################


def test_relu():
    results = {}
    x = torch.randn(1000, device="cuda")
    results["test_case_1"] = relu(x)
    x = torch.randn(33, 65, device="cuda")
    results["test_case_2"] = relu(x)
    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    results["test_case_3"] = relu(x)
    x = torch.randn(777, device="cuda")
    results["test_case_4"] = relu(x)
    return results


result_gold = test_relu()
