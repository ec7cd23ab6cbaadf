"""Which device sandbox children use, decided without touching CUDA in this process."""

from __future__ import annotations

import os


def detect_device() -> str:
    """`cuda` on a GPU node, else `cpu`; KERNELBAND_DEVICE overrides (never initialises CUDA)."""
    forced = os.environ.get("KERNELBAND_DEVICE", "").strip()
    if forced:
        return forced
    return "cuda" if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0") else "cpu"


GPU_TARGETS = "h100, h200, a100 or rtx4090"
_INTERPRETER_LIMITS = {"timeout": "interpreter_timeout", "cpu_limit": "interpreter_timeout",
                       "memory_limit": "interpreter_memory"}
# What a verdict says when the original moved NaN/Inf positions (or shapes) between two runs on
# identical inputs: at load (kernelband.problem.selfcheck) or in the judge's re-run of the
# reference (kernelband.evaluate.judge).
ORIGINAL_MOVED = "the original itself moved NaN/Inf positions or shapes when run again"
# Verdicts that, for the original checked against itself, mean it disagreed with itself.
_SELF_DISAGREEMENT = ("wrong_result", "nan_mismatch", "nondeterministic")
_UNSUPPORTED_MARKS = ("InterpreterError", "CPU Triton interpreter", "not compiled with CUDA",
                      "CUDA", "Block pointers have been removed", "Unknown device")


def interpreter_refusal(reason: str, message: str) -> tuple[str, str] | None:
    """(reason, message) naming the CPU interpreter as what failed an ORIGINAL kernel (a
    timeout, a crash, an unsupported feature), or None when the failure is the file's own."""
    if reason in _INTERPRETER_LIMITS:
        why = "runs every program instance in Python and did not finish within the limits"
        new = _INTERPRETER_LIMITS[reason]
    elif reason.startswith("crashed:"):
        why, new = f"crashed ({reason})", "interpreter_crash"
    elif any(mark in message for mark in _UNSUPPORTED_MARKS):
        why, new = "does not support what this file uses", "interpreter_unsupported"
    else:
        return None
    return new, (f"{new}: the CPU Triton interpreter {why}: {message}; check this problem on a "
                 f"GPU target ({GPU_TARGETS}), e.g. `kernelband check FILE` on a GPU node")


def interpreter_irreproducible(reason: str, message: str) -> tuple[str, str] | None:
    """(reason, message) for a verdict on an ORIGINAL kernel checked in the CPU interpreter that
    refused it as wrong or nondeterministic: reference and candidate are then the same code, so
    the original did not reproduce its own results there (on a GPU it may well do). None for
    any other verdict."""
    if reason not in _SELF_DISAGREEMENT:
        return None
    new = "interpreter_irreproducible"
    return new, (f"{new}: in the CPU Triton interpreter the original does not reproduce its own "
                 f"results ({message}); check this problem on a GPU target ({GPU_TARGETS}), e.g. "
                 "`kernelband check FILE` on a GPU node")
