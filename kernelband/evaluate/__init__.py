"""Correctness and anti-cheat evaluation of candidate kernels (`evaluate_candidate`)."""

from kernelband.evaluate.evaluator import evaluate_candidate
from kernelband.evaluate.static_checks import StaticRejection, check_source
from kernelband.evaluate.verdict import Verdict, needs_reverification

__all__ = ["StaticRejection", "Verdict", "check_source", "evaluate_candidate", "needs_reverification"]
