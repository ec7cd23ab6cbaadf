"""Probe: under one `ncu` session, does a pre-imported parent's forked child get profiled, and
are its results printed when that child exits (not only when the parent does)?

Run as: ncu --csv --page raw --target-processes all --metrics ... python ncu_fork_probe.py MODE
MODE: `fork` (parent imports torch/triton once, forks a child per run) or `cold` (one run).
"""

from __future__ import annotations

import os
import sys
import time

T0 = time.time()


def stamp(text: str) -> None:
    print(f"@@ {time.time() - T0:8.3f} {text}", flush=True)


stamp("start")
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

stamp("imported torch and triton")


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def one_run(tag: str) -> None:
    x = torch.randn(1 << 22, device="cuda")
    out = torch.empty_like(x)
    stamp(f"{tag} cuda ready")
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    stamp(f"{tag} kernel done")


def main(mode: str) -> None:
    if mode == "cold":
        one_run("cold")
        return
    for i in range(3):
        pid = os.fork()
        if pid == 0:
            one_run(f"child{i}")
            if i == 1:
                os._exit(0)  # no atexit handlers: are results still reported?
            sys.exit(0)
        os.waitpid(pid, 0)
        stamp(f"child{i} reaped")
        time.sleep(3)
    stamp("parent exits")


if __name__ == "__main__":
    main(sys.argv[1])
