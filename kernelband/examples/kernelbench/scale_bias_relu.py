import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    """y = relu(x * scale + bias) with a learned per-feature scale and bias."""

    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * self.scale + self.bias)


batch_size = 12
features = 70


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]


# kernelband: editable begin
@triton.jit
def scale_bias_relu_kernel(x_ptr, s_ptr, b_ptr, out_ptr, n_elements, features, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    feat = offs % features
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr + feat, mask=mask)
    b = tl.load(b_ptr + feat, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x * s + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 32),)
        scale_bias_relu_kernel[grid](
            x, self.scale, self.bias, out, n, x.shape[-1], BLOCK=32, num_warps=4
        )
        return out
# kernelband: editable end
