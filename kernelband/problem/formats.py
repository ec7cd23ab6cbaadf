"""The loader of each problem format (they import torch and the user's module: sandbox child only)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernelband.problem.devices import use_interpreter_for
from kernelband.problem.kernelbench import load_kernelbench
from kernelband.problem.model import KernelProblem
from kernelband.problem.native import load_native
from kernelband.problem.tritonbench import load_tritonbench

Loader = Callable[[str, str, Path, str], KernelProblem]  # (source, name, workdir, device)
LOADERS: dict[str, Loader] = {
    "native": load_native,
    "tritonbench": load_tritonbench,
    "kernelbench": load_kernelbench,
}


def load_format(source: str, format: str, name: str, workdir: Path, device: str) -> KernelProblem:
    """Import `source` with its format's loader, Triton set up for `device` first."""
    use_interpreter_for(device)
    return LOADERS[format](source, name, workdir, device)
