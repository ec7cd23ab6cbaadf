"""Run untrusted candidate code in a confined child process (see `run_sandboxed`)."""

from kernelband.sandbox.limits import SandboxLimits, SandboxResult
from kernelband.sandbox.pool import shutdown_pool
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.sandbox.runner import run_sandboxed

__all__ = [
    "SandboxLimits",
    "SandboxResult",
    "load_problem_sandboxed",
    "run_sandboxed",
    "shutdown_pool",
]
