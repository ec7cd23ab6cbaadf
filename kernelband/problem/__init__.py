"""Kernel problems: the native format, the TritonBench-G and KernelBench importers, runtimes.

Importing this package is cheap and safe: `load_problem` and `kernelband.problem.runtime`
execute user code and import torch only when called (inside the sandbox child).
"""

from kernelband.problem.editable import extract_region, normalize_candidate, splice_region
from kernelband.problem.loader import load_problem
from kernelband.problem.model import (
    DEFAULT_TOLERANCES,
    PROBLEM_FORMATS,
    Case,
    KernelProblem,
    ProblemLoadError,
)

__all__ = [
    "DEFAULT_TOLERANCES",
    "PROBLEM_FORMATS",
    "Case",
    "KernelProblem",
    "ProblemLoadError",
    "extract_region",
    "load_problem",
    "normalize_candidate",
    "splice_region",
]
