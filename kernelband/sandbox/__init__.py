"""Run untrusted candidate code in a confined child process (see `run_sandboxed`)."""

from kernelband.sandbox.limits import JOB_LIMITS, SandboxLimits, SandboxResult, job_limits
from kernelband.sandbox.pool import shutdown_pool
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.sandbox.runner import run_sandboxed

__all__ = [
    "JOB_LIMITS",
    "SandboxLimits",
    "SandboxResult",
    "load_problem_sandboxed",
    "run_sandboxed",
    "job_limits",
    "shutdown_pool",
]
