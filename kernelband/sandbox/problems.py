"""Load a user's problem file inside the sandbox (loading executes the user's module)."""

from __future__ import annotations

from typing import Any

from kernelband.problem.loader import load_problem
from kernelband.problem.model import KernelProblem, ProblemLoadError
from kernelband.sandbox.device import detect_device, interpreter_refusal
from kernelband.sandbox.gpu_lock import gpu_turn
from kernelband.sandbox.limits import SandboxLimits
from kernelband.sandbox.runner import run_sandboxed
from kernelband.sandbox.secrets import scrub_secrets


def load_problem_target(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{"problem": dict}` or `{"error": {"reason", "line"}}`."""
    try:
        problem = load_problem(payload["source"], payload["format"], payload["name"])
    except ProblemLoadError as exc:
        return {"error": {"reason": exc.reason, "line": exc.line}}
    return {"problem": problem.to_dict()}


def load_problem_sandboxed(
    source: str, format: str, name: str, limits: SandboxLimits | None = None
) -> KernelProblem:
    """`load_problem` run in a sandbox child; raises ProblemLoadError with the loader's reason."""
    limits = limits or SandboxLimits.from_settings(interpret=_needs_interpreter())
    # loading runs the user's module, and a TritonBench-G test on the device: GPU work that must
    # not land inside another candidate's timed rounds on this node
    with gpu_turn(detect_device(), exclusive=False):
        result = run_sandboxed(
            "kernelband.sandbox.problems:load_problem_target",
            {"source": source, "format": format, "name": name},
            limits,
        )
    if not result.ok:
        message = result.message.splitlines()[0] if result.message else "no details"
        found = interpreter_refusal(result.reason, message) if limits.interpret else None
        if found is not None:
            raise ProblemLoadError(f"loading the problem failed in the sandbox: {found[1]}")
        raise ProblemLoadError(
            f"loading the problem failed in the sandbox ({result.reason}): {message}; "
            "check that the file imports and runs on its own"
        )
    value = result.value or {}
    if "error" in value:
        reason = scrub_secrets(str(value["error"]["reason"]))  # goes back to the submitting team
        found = interpreter_refusal("load_error", reason) if limits.interpret else None
        raise ProblemLoadError(found[1] if found else reason, value["error"].get("line"))
    return KernelProblem.from_dict(value["problem"])


def _needs_interpreter() -> bool:
    return detect_device() == "cpu"
