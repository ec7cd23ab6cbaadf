"""The correctness runner: runs the reference and/or the candidate and writes their raw outputs.

Runs only inside a sandbox child (it imports the problem module and the candidate). The judge
(`kernelband.evaluate.judge`) names every call to make and every file to write in the payload;
this module makes the calls, saves each result with `kernelband.runner.outputs` and reports
`{"status": "ok" | "rejected", ...}`. Its in-process observations (Triton launches, torch and
host work, aliasing, input mutation, results changing after return, timers, sandbox
violations) are a second wall: a runner may reject, and a candidate can only hurt itself by a
reject, but an "ok" decides nothing. The judge compares the files.

`run_correctness(payload)` is the sandbox target behind `evaluate_candidate`.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from kernelband.evaluate.compare import bitwise_equal, snapshot
from kernelband.evaluate.integrity import TimerSeal
from kernelband.problem.cuda_guard import guarded_launches, remove_guard
from kernelband.problem.model import Case, KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.launches import capture_launches
from kernelband.runner.checks import (
    AT_RETURN,
    ON_RESULT,
    SANDBOX_VIOLATION,
    CandidateCall,
    Check,
    first_failure,
)
from kernelband.runner.observe import (
    early_copy,
    host_work,
    live_threads,
    scrub_reference,
    scrub_released,
)
from kernelband.runner.outputs import write_index, write_output
from kernelband.runner.torch_work import TorchWork

TARGET = "kernelband.runner.correctness:run_correctness"


class Rejected(Exception):
    """Raised inside the runner to stop at the first failure."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def _reject_on(checks: tuple[Check, ...], call: CandidateCall) -> None:
    if found := first_failure(checks, call):
        raise Rejected(found[0].reason, f"{call.where}: {found[1]}")


class CaseRunner:
    """Runs the calls the judge asked for on fresh inputs and watches the candidate's."""

    def __init__(self, problem: KernelProblem, runtime: Any, count_launches: bool = True,
                 seal: TimerSeal | None = None) -> None:
        self.problem, self.runtime = problem, runtime
        self.count_launches = count_launches
        self.seal = seal  # taken before the candidate's module code ran
        self.run_s = 0.0
        self.original_work: dict[str, int] = {}  # case name -> the original's torch work
        self.written: list[dict[str, Any]] = []  # the index
        self.moved: set[str] = set()  # cases whose candidate differed bitwise from the reference
        self.current: int | None = None  # the index of the step (or re-run) running now
        if hasattr(runtime, "share_runs"):
            runtime.share_runs = True  # one test run answers every case of a seed

    def _run(self, fn: Any, args: list[Any], work: Any, host: Any, launches: list[Any]) -> Any:
        """`fn(args)` under the launch capture (appending to `launches`), the torch-work and the
        host-work modes, on the runner's clock."""
        # The reference runs under the same launch capture as the candidate: a capture keeps
        # each launch's arguments alive until the call returns, and a kernel that reads memory
        # it never wrote must find the same memory layout in both runs.
        context = capture_launches() if self.count_launches else nullcontext(launches)
        start = time.perf_counter()
        try:
            with context as captured, (work if work is not None else nullcontext()), host:
                out = fn(args)
        finally:
            self.run_s += time.perf_counter() - start
        if captured is not launches:
            launches.extend(captured)
        return out

    def _reference(self, args: list[Any], where: str, work: Any = None) -> Any:
        """The reference on `args` (a re-run is one more call on identical inputs)."""
        try:
            return self._run(self.runtime.reference, args, work, nullcontext(), [])
        except Rejected:
            raise
        except Exception as exc:
            raise Rejected("reference_error", f"{where}: reference raised {type(exc).__name__}: {exc}") from exc

    def _candidate(self, args: list[Any], where: str, work: Any = None, again: bool = False,
                   before: Any = None) -> CandidateCall:
        """The candidate (or, `again`, its determinism re-run: TritonBench re-runs the test once
        per seed) on `args`, with the checks made at its return."""
        fn = getattr(self.runtime, "candidate_again", self.runtime.candidate) if again else self.runtime.candidate
        call = CandidateCall(where, args, before=before, seal=self.seal, work=work,
                             count_launches=self.count_launches,
                             inplace=tuple(self.problem.inplace_outputs))
        call.host = host_work(args, self.runtime) if self.count_launches else nullcontext()
        call.threads = live_threads()
        try:
            call.out = self._run(fn, args, work, call.host, call.launches)
        except Rejected:
            raise
        except Exception as exc:
            _reject_on((SANDBOX_VIOLATION,), call)
            raise Rejected("candidate_error", f"{where}: candidate raised {type(exc).__name__}: {exc}") from exc
        _reject_on((SANDBOX_VIOLATION,), call)
        call.early = early_copy(call.out)
        # a result from an earlier run of the same test (TritonBench) launched in that run
        call.cached = bool(getattr(self.runtime, "served_from_cache", False))
        if work is not None:
            work.cached = call.cached
        _reject_on(AT_RETURN, call)
        # The captured launches hold every argument of every kernel the call made, its
        # temporaries too. Released now, as the reference's are when its call returns, so the
        # next call (the determinism re-run, or the reference when it runs second) finds the same
        # memory layout: a kernel that reads memory it never wrote then reads the same bytes.
        call.launches.clear()
        return call

    def _works(self, with_reference: bool) -> tuple[Any, Any]:
        """TorchWork for the candidate's and (TritonBench, when it runs here) the original's
        region, or Nones."""
        if not self.count_launches:
            return None, None
        cand = TorchWork(self.runtime.candidate_region)
        ref = (TorchWork(self.runtime.original_region)
               if with_reference and self.runtime.reference_is_original else None)
        return cand, ref

    def _original_work(self, case: Case, seed: int, measured: Any) -> int:
        """Elements the original kernel reads with torch in its region functions, per case."""
        if measured is not None and not getattr(measured, "cached", False):
            self.original_work.setdefault(case.name, measured.elements)
        if case.name not in self.original_work:
            work = TorchWork(self.runtime.original_region)
            args = self.runtime.inputs(case, seed)
            try:
                with work:
                    out = self.runtime.original(args)
                scrub_reference(out, args, self.runtime)  # nothing left to read back
                scrub_released()
            except Exception:  # an original that cannot run alone does no allowed torch work
                work.elements = 0
            self.original_work[case.name] = work.elements
        return self.original_work[case.name]

    def _outputs(self, out: Any, args: list[Any]) -> Any:
        inplace = self.problem.inplace_outputs
        return (out, [args[i] for i in inplace]) if inplace else out

    def _save(self, name: str, role: str, step: dict[str, Any], value: Any) -> None:
        write_output(name, value)
        self.written.append({"file": name, "role": role, "where": step["where"], "seed": step["seed"]})

    def step(self, step: dict[str, Any], case: Case) -> None:
        """One (case, seed): the calls the judge asked for, in its order, each result saved."""
        files, seed, where = step["files"], int(step["seed"]), str(step["where"])
        ref_out: Any = None
        actual: Any = None
        if "candidate" in files:
            cand_args = self.runtime.inputs(case, seed)
            before = snapshot(cand_args)
        if "reference" in files:
            ref_args = self.runtime.inputs(case, seed)
        work, ref_work = self._works("reference" in files) if "candidate" in files else (None, None)
        candidate_first = bool(step.get("candidate_first")) and "candidate" in files
        if "reference" in files and not candidate_first:
            ref_out = self._reference(ref_args, where, ref_work)
            self._save(files["reference"], "reference", step, self._outputs(ref_out, ref_args))
            if "candidate" in files:  # what the reference left in memory is gone first
                ref_out = scrub_reference(ref_out, ref_args, self.runtime)
                scrub_released()
        if "candidate" in files:
            call = self._candidate(cand_args, where, work, before=before)
            if "reference" in files and candidate_first:
                ref_out = self._reference(ref_args, where, ref_work)
                self._save(files["reference"], "reference", step, self._outputs(ref_out, ref_args))
            call.original_work = lambda: self._original_work(case, seed, ref_work)
            _reject_on(ON_RESULT, call)
            actual = self._outputs(call.out, cand_args)
            self._save(files["candidate"], "candidate", step, actual)
            if "reference" in files and not bitwise_equal(self._outputs(ref_out, ref_args), actual):
                self.moved.add(case.name)
        if "candidate_again" in files:
            args = self.runtime.inputs(case, seed)
            again = self._outputs(self._candidate(args, where, again=True).out, args)
            self._save(files["candidate_again"], "candidate_again", step, again)
            if "candidate" in files and not bitwise_equal(actual, again):
                self.moved.add(case.name)

    def again(self, step: dict[str, Any], case: Case) -> None:
        """The reference run once more on identical inputs (how far it moves by itself)."""
        args = self.runtime.inputs(case, int(step["seed"]))
        out = self._reference(args, str(step["where"]))
        self._save(step["file"], "reference_again", step, self._outputs(out, args))


def _cases(problem: KernelProblem) -> dict[str, Case]:
    return {c.name: c for c in (*problem.cases, *problem.held_out_cases)}


def _run_steps(runner: CaseRunner, payload: dict[str, Any], cases: dict[str, Case]) -> None:
    for index, step in enumerate(payload["steps"]):
        runner.current = index
        runner.step(step, cases[step["case"]])
    # after every first run: a TritonBench re-run then answers every case of its seed
    only_moved = bool(payload.get("again_only_when_moved"))
    for index, step in enumerate(payload.get("again", []), len(payload["steps"])):
        if not only_moved or step["case"] in runner.moved:
            runner.current = index
            runner.again(step, cases[step["case"]])


def _checked(runner: CaseRunner, payload: dict[str, Any], problem: KernelProblem) -> dict[str, Any]:
    """The judge's steps on a loaded runtime: the report; the outputs and their index are files."""
    report: dict[str, Any] = {"status": "ok"}
    try:
        with guarded_launches():  # on a GPU: zeros past every tensor's end, for both sides
            _run_steps(runner, payload, _cases(problem))
    except Rejected as rej:
        report = {"status": "rejected", "reason": rej.reason, "message": rej.message, "step": runner.current}
    finally:
        write_index(runner.written)
    return report


def check_loaded(runtime: Any, payload: dict[str, Any], seal: TimerSeal) -> dict[str, Any]:
    """The correctness steps of `payload` (`{problem, count_launches, steps, again}`) run on a
    runtime a timing runner already loaded (its `check` command): the same calls, checks and
    files as `run_correctness`, without a second process loading and compiling the candidate.
    `seal` was taken before any of the process's untrusted code ran."""
    problem = KernelProblem.from_dict(payload["problem"])
    shared = getattr(runtime, "share_runs", None)  # before CaseRunner turns it on
    runner = CaseRunner(problem, runtime, count_launches=payload.get("count_launches", True), seal=seal)
    start = time.perf_counter()
    try:
        report = _checked(runner, payload, problem)
    finally:
        # what the check put in place goes: the timed calls run the test every time, and launch
        # through Triton's own code, as in the original's runner, which never checked
        remove_guard()
        if shared is not None:
            runtime.share_runs = shared
            runtime.forget_runs()
    return {**report, "runner_reported": {"load_s": 0.0, "run_s": runner.run_s,
                                          "check_s": time.perf_counter() - start}}


def run_correctness(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, device, count_launches, steps, again}` ->
    `{status, reason, message, step, runner_reported}`; the outputs are files."""
    problem = KernelProblem.from_dict(payload["problem"])
    start = time.perf_counter()
    seal = TimerSeal()  # before the candidate's module code runs
    try:
        runtime = load_runtime(problem, payload.get("editable"), payload["device"])
    except Exception as exc:
        return {"status": "rejected", "reason": "load_error", "step": None,
                "message": f"the candidate could not be loaded: {type(exc).__name__}: {exc}"}
    load_s = time.perf_counter() - start
    runner = CaseRunner(problem, runtime, count_launches=payload.get("count_launches", True), seal=seal)
    report = _checked(runner, payload, problem)
    return {**report, "runner_reported": {"load_s": load_s, "run_s": runner.run_s}}
