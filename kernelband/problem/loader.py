"""`load_problem`: one entry point for the three formats (sandbox child only)."""

from __future__ import annotations

from pathlib import Path

from kernelband.problem.model import PROBLEM_FORMATS, KernelProblem, ProblemLoadError


def default_device() -> str:
    """'cuda' on a machine with a usable GPU, else 'cpu' (the Triton interpreter)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_problem(
    source: str,
    format: str,
    name: str,
    *,
    workdir: str | Path | None = None,
    device: str | None = None,
) -> KernelProblem:
    """Import `source` in `format` and return the validated problem.

    Executes the user's module: call it only inside the sandbox child. The module file is
    written to `workdir` (default: the current directory, the sandbox's private temp dir).
    """
    if format not in PROBLEM_FORMATS:
        raise ProblemLoadError(
            f"unknown problem format {format!r}; use one of {', '.join(PROBLEM_FORMATS)}"
        )
    if not source.strip():
        raise ProblemLoadError("the problem file is empty; submit the module text")
    # the loaders import torch: only a process that loads a problem (a sandbox child) pays for it
    from kernelband.problem.formats import load_format

    return load_format(source, format, name, Path(workdir or Path.cwd()), device or default_device())
