"""Repair turns: the failure of a child, trimmed to what helps, appended to its conversation.

Only the LLM generator repairs: the rules generator has no conversation to continue, so its
failed children end their pull as before. Held-out cases never appear in a repair message:
lines that mention one are dropped (the compile and profile steps only run public cases, so
this is a second guard, not the first).
"""

from __future__ import annotations

import re
from typing import Any

from kernelband.generate.templates import render_template
from kernelband.problem.model import KernelProblem

MESSAGE_CHARS = 1200
TRACE_LINES = 20
TRACE_CHARS = 1500
_CASE = re.compile(r"\bcase ([A-Za-z0-9_.\-]+)")
# Failures that say nothing about the reply (the provider, the budget): no repair is possible.
NOT_REPAIRABLE = ("rate_limited", "server_error", "timeout", "connection_error", "auth_error",
                  "client_error", "error:", "budget_exhausted", "task_error", "abandoned",
                  "cancelled", "measure_failed", "no_result")


def is_repairable(reason: str) -> bool:
    """True when the failure is the code's fault (compile, correctness, a crash)."""
    return bool(reason) and not reason.startswith(NOT_REPAIRABLE)


def _public_lines(text: str, problem: KernelProblem | None) -> list[str]:
    hidden = {c.name for c in problem.held_out_cases} if problem is not None else set()
    keep = []
    for line in text.splitlines():
        names = set(_CASE.findall(line))
        if "held-out" in line.lower() or "held_out" in line.lower() or names & hidden:
            continue
        keep.append(line)
    return keep


def _case_params(message: str, problem: KernelProblem | None) -> str:
    """The parameters of the first public case the message names ('' if none)."""
    if problem is None:
        return ""
    public = {c.name: c for c in problem.cases if not c.held_out}
    for name in _CASE.findall(message):
        case = public.get(name.rstrip(",.:"))
        if case is not None:
            params = ", ".join(f"{k}={v}" for k, v in case.params.items())
            return f"case {case.name}: {params}{', ' if params else ''}dtype={case.dtype}"
    return ""


def failure_feedback(result: dict[str, Any], problem: KernelProblem | None) -> str:
    """What went wrong, trimmed: the reason, the first mismatching public case, max error,
    dtype, and the last lines of an error output. Never a held-out case."""
    reason = str(result.get("reason") or "rejected")
    verdict = result.get("verdict") if isinstance(result.get("verdict"), dict) else {}
    message = str(result.get("message") or (verdict or {}).get("message") or "")
    details = (verdict or {}).get("details") or {}
    lines = [f"reason: {reason}"]
    public = _public_lines(message, problem)
    if public:
        lines.append("message: " + "\n".join(public)[:MESSAGE_CHARS])
    case = _case_params(message, problem) if public else ""
    if case:
        lines.append(f"first failing {case}")
    if isinstance(details.get("max_abs_err"), int | float):
        lines.append(f"max_abs_err: {details['max_abs_err']:.3g}")
    trace = str(details.get("stderr_tail") or "")
    if trace.strip():
        tail = _public_lines(trace, problem)[-TRACE_LINES:]
        lines.append("error output (last lines):\n" + "\n".join(tail)[-TRACE_CHARS:])
    return "\n".join(lines)


def repair_messages(conversation: list[dict[str, str]], reply: str, feedback: str,
                    turn: int, entry: str) -> list[dict[str, str]]:
    """The conversation so far, the model's reply, and a user turn with the failure."""
    user = render_template("repair.md.j2", turn=turn, feedback=feedback.strip(), entry=entry)
    return [*conversation, {"role": "assistant", "content": reply},
            {"role": "user", "content": user}]
