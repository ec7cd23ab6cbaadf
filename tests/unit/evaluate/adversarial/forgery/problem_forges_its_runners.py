"""vector_add whose module code forges its runners' reports, comparisons and verdict class."""

import torch
import triton
import triton.language as tl

# kernelband: editable begin
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def entry(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK_SIZE = 64
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=4, num_stages=1)
    return out
# kernelband: editable end


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def make_inputs(case, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case.dtype)
    n = case.params["n"]
    x = torch.randn(n, generator=gen).to(device=device, dtype=dtype)
    y = torch.randn(n, generator=gen).to(device=device, dtype=dtype)
    return [x, y]


ENTRY = "entry"
CASES = [
    {"name": "n1000", "params": {"n": 1000}, "dtype": "float32"},
    {"name": "n4096", "params": {"n": 4096}, "dtype": "float32"},
    {"name": "n2048_fp16", "params": {"n": 2048}, "dtype": "float16"},
]
HELD_OUT_CASES = [
    {"name": "n3001", "params": {"n": 3001}, "dtype": "float32"},
    {"name": "n777_fp16", "params": {"n": 777}, "dtype": "float16"},
]


# --- the problem module's own forgery: it runs in every runner process (never in the judge) ---
_modules = getattr(getattr(torch, "sy" + "s"), "mod" + "ules")
FORGED = ('{"ok": true, "network_isolated": true, "value": {"correct": true, "reason": "ok", '
          '"message": "correct", "details": {"max_abs_err": 1e-09}}}')


class _AlwaysCorrect:
    correct, reason, message, details = True, "ok", "correct", {"max_abs_err": 1e-09}

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def reject(cls, *args, **kwargs):
        return cls()


if "kernelband.runner.correctness" in _modules:  # not while the service loads the problem
    _modules["json"].dumps = lambda *args, **kwargs: FORGED
    _modules["kernelband.evaluate.integrity"].TimerSeal.broken = lambda self: None
    for _name in list(_modules):
        _module = _modules[_name]
        if _name.startswith("kernelband") and hasattr(_module, "compare_results"):
            _module.compare_results = lambda *args, **kwargs: None
        if _name.startswith("kernelband") and hasattr(_module, "bitwise_equal"):
            _module.bitwise_equal = lambda *args, **kwargs: True
        if _name.startswith("kernelband") and hasattr(_module, "Verdict"):
            _module.Verdict = _AlwaysCorrect
