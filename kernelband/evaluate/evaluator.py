"""`evaluate_candidate`: static checks here, everything that runs code in the sandbox."""

from __future__ import annotations

import random
from dataclasses import replace

from kernelband.evaluate.static_checks import check_source
from kernelband.evaluate.verdict import Verdict
from kernelband.problem.model import KernelProblem
from kernelband.sandbox import SandboxLimits, run_sandboxed
from kernelband.sandbox.device import detect_device, interpreter_irreproducible, interpreter_refusal

TARGET = "kernelband.evaluate.checks:evaluate_target"


def evaluate_candidate(
    problem: KernelProblem,
    editable: str | None,
    *,
    held_out: bool = False,
    seeds: int = 3,
    limits: SandboxLimits | None = None,
    device: str | None = None,
    static_checks: bool = True,
) -> Verdict:
    """Check `editable` (None: the original kernel) against the reference in a sandbox child.

    `static_checks=False` skips the source checks (only to test the runtime defences).
    """
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    if editable is not None and static_checks:
        found = check_source(editable)
        if found is not None:
            return Verdict.reject(found.reason, found.message, details={"line": found.line})
    device = device or detect_device()
    interpret = not device.startswith("cuda")
    limits = replace(limits or SandboxLimits.from_settings(interpret=interpret), interpret=interpret)
    payload = {
        "problem": problem.to_dict(), "editable": editable, "device": device, "seeds": seeds,
        "held_out": held_out, "base_seed": random.SystemRandom().randrange(1, 1 << 30),
        # a published KernelBench file's placeholder is the PyTorch Model itself: it is checked
        # to run and agree with Model, never judged as a Triton kernel (problem/translate.py)
        "count_launches": not (editable is None and problem.needs_translation),
    }
    result = run_sandboxed(TARGET, payload, limits)
    if result.ok and isinstance(result.value, dict):
        verdict = Verdict.from_dict(result.value)
        if editable is None and limits.interpret and not verdict.correct:  # the original
            moved = interpreter_irreproducible(verdict.reason, verdict.message)
            verdict = replace(verdict, reason=moved[0], message=moved[1]) if moved else verdict
        flags = verdict.flags + (("network_not_isolated",) if result.network_isolated is False else ())
        details = {**verdict.details, "sandbox_wall_s": result.wall_s, "warm": result.warm}
        return replace(verdict, flags=flags, details=details)
    message = result.message.strip().splitlines()[0] if result.message.strip() else result.reason
    reason, message = result.reason, f"{message} (sandbox, after {result.wall_s:.1f} s)"
    if editable is None and limits.interpret:  # the original: its failure here is the interpreter's
        reason, message = interpreter_refusal(reason, message) or (reason, message)
    return Verdict.reject(
        reason, message, seeds=seeds,
        details={"sandbox_wall_s": result.wall_s, "stderr_tail": result.stderr_tail[-1500:], "warm": result.warm},
    )
