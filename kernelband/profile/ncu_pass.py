"""The Nsight Compute pass of a GPU measurement: h from one profiled run of the slowest case.

It runs as its own sandbox request after the timing run (`ncu_pass_task`), in one of two ways:

- warm: the sandbox child was forked from the zygote that `ncu --mode=launch` started (the
  environment says `KERNELBAND_NCU_LAUNCHED=1`). It forks a grandchild that runs the case with
  torch and triton already imported; the grandchild stops at its first CUDA call until a short
  `ncu --mode=attach` session, started here inside the child's own network namespace, profiles it.
- fresh: `ncu` launches a new interpreter that imports torch and triton again (several seconds
  on a GPU node) and profiles it. Used when no launched zygote could be started.

This child runs only trusted code; the process that runs the candidate installs the audit guard
itself (`ncu_child.run_case`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelband.profile.ncu import NcuOutcome, attach_ncu, run_ncu
from kernelband.sandbox import zygote
from kernelband.sandbox.zygote import NCU_LAUNCHED_ENV as LAUNCHED_ENV

NCU_TIMEOUT_S = 180.0
ATTACH_RETRY_S = 0.2
RUN_LOG = "ncu-run.log"  # the profiled run's output, in the sandbox work dir: reported on failure
# ncu gives up on an attach at once when nothing waits yet; these outcomes will not change
_FINAL_REASONS = ("missing", "permission", "refused", "timeout")
# the attach frontend gets only these variables: never the launch-mode injection settings
_FRONTEND_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class NcuCase:
    """Which run the pass profiles: a public case and the Triton kernels it launches."""

    case_index: int
    kernels: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"case_index": self.case_index, "kernels": list(self.kernels)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NcuCase:
        return cls(int(data["case_index"]), tuple(data["kernels"]))

    def kernel_regex(self) -> str:
        """Only the candidate's Triton kernels: input generation launches torch kernels too."""
        return "^(" + "|".join(sorted(re.escape(k) for k in self.kernels)) + ")$"


def ncu_pass_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, case: NcuCase dict, timeout_s}` ->
    `{outcome: NcuOutcome dict, mode: "warm"|"fresh", seconds}`."""
    case = NcuCase.from_dict(payload["case"])
    run = {"problem": payload["problem"], "editable": payload.get("editable"),
           "case_index": case.case_index}
    timeout_s = float(payload.get("timeout_s", NCU_TIMEOUT_S))
    warm = os.environ.get(LAUNCHED_ENV) == "1"
    start = time.monotonic()
    outcome = (_attached(run, case.kernel_regex(), timeout_s) if warm
               else _fresh(run, case.kernel_regex(), timeout_s))
    return {"outcome": outcome.to_dict(), "mode": "warm" if warm else "fresh",
            "seconds": time.monotonic() - start}


def _fresh(run: dict[str, Any], regex: str, timeout_s: float) -> NcuOutcome:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "payload.json"
        path.write_text(json.dumps(run))
        command = [sys.executable, "-m", "kernelband.profile.ncu_child", str(path)]
        return run_ncu(command, timeout_s, kernel_regex=regex)


def _attached(run: dict[str, Any], regex: str, timeout_s: float) -> NcuOutcome:
    env = {k: v for k, v in os.environ.items() if k in _FRONTEND_ENV}
    deadline = time.monotonic() + timeout_s
    pid = os.fork()
    if pid == 0:
        _grandchild(run)
    outcome = NcuOutcome(False, reason="not_attached")
    try:
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                pid = 0  # reaped: it ended before ncu could profile a kernel of it
                outcome = NcuOutcome(False, reason="not_attached", message=(
                    "the profiled run ended without a profile; last ncu output: "
                    + (outcome.message or "none")))
                break
            outcome = attach_ncu(max(1.0, deadline - time.monotonic()), regex, env)
            if outcome.ok or outcome.reason in _FINAL_REASONS:
                break
            time.sleep(ATTACH_RETRY_S)
        else:
            outcome = NcuOutcome(False, reason="timeout", message=f"no profile within {timeout_s:.0f}s")
    finally:
        if pid:
            _end(pid, wait_s=5.0 if outcome.ok else 0.0)
    if outcome.ok:
        return outcome
    return replace(outcome, message=f"{outcome.message}; the run's own output: {_run_log_tail()}")


def _run_log_tail(chars: int = 1500) -> str:
    try:
        text = Path(RUN_LOG).read_text(errors="replace").strip()
    except OSError:
        return "none"
    return text[-chars:] or "none"


def _grandchild(run: dict[str, Any]) -> None:
    """The forked process that runs the candidate once; never returns."""
    code = 0
    try:
        log = os.open(RUN_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        # lazy: the fresh path runs ncu_child with -m, which warns if this package loaded it first
        from kernelband.profile.ncu_child import run_case

        if zygote.RESULT_FD is not None:
            os.close(zygote.RESULT_FD)  # the sandbox result is the parent's alone to write
        run_case(run)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _end(pid: int, wait_s: float) -> None:
    """Reap the grandchild, killing it if it is still running after `wait_s`."""
    stop = time.monotonic() + wait_s
    while time.monotonic() < stop:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    os.waitpid(pid, 0)
