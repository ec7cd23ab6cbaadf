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

from kernelband.evaluate import hardening
from kernelband.evaluate.compare import aliased_indices, bitwise_equal, mutated_indices, snapshot
from kernelband.evaluate.torch_work import TORCH_WORK_SLACK, TorchWork, allowance
from kernelband.problem.cuda_guard import guarded_launches
from kernelband.problem.model import Case, KernelProblem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.launches import capture_launches
from kernelband.runner.outputs import write_index, write_output
from kernelband.sandbox import guard

TARGET = "kernelband.runner.correctness:run_correctness"
# A candidate whose torch calls in its region functions (outside its Triton launches) read at
# least this many elements per input element, and more than the original's own torch work
# (plus TORCH_WORK_SLACK), computed the result with torch, not with its kernel. An epilogue on
# the output (a bias add after a Triton matmul) reads less and passes.
TORCH_SHARE_LIMIT = 1.0


class Rejected(Exception):
    """Raised inside the runner to stop at the first failure."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class CaseRunner:
    """Runs the calls the judge asked for on fresh inputs and watches the candidate's."""

    def __init__(self, problem: KernelProblem, runtime: Any, count_launches: bool = True,
                 seal: Any = None) -> None:
        self.problem, self.runtime = problem, runtime
        self.count_launches = count_launches
        self.seal = seal  # taken before the candidate's module code ran
        self.run_s = 0.0
        self.early: Any = None  # the candidate's result as it was at return
        self.original_work: dict[str, int] = {}  # case name -> the original's torch work
        self.written: list[dict[str, Any]] = []  # the index
        self.moved: set[str] = set()  # cases whose candidate differed bitwise from the reference
        self.current: int | None = None  # the index of the step (or re-run) running now
        if hasattr(runtime, "share_runs"):
            runtime.share_runs = True  # one test run answers every case of a seed

    def _call(self, who: str, args: list[Any], where: str, work: Any = None, again: bool = False) -> Any:
        fn = self.runtime.candidate if who == "candidate" else self.runtime.reference
        if again:  # the determinism re-run (TritonBench: one re-run of the test per seed)
            fn = getattr(self.runtime, "candidate_again" if who == "candidate" else "reference", fn)
        launches: list[Any] = []
        watched = who == "candidate" and self.count_launches
        # The reference runs under the same launch capture as the candidate: a capture keeps
        # each launch's arguments alive until the call returns, and a kernel that reads memory
        # it never wrote must find the same memory layout in both runs.
        context = capture_launches() if self.count_launches else nullcontext(launches)
        host: Any = hardening.host_work(args, self.runtime) if watched else nullcontext()
        threads = hardening.live_threads()
        start = time.perf_counter()
        try:
            with context as launches, (work if work is not None else nullcontext()), host:
                out = fn(args)
        except Rejected:
            raise
        except Exception as exc:
            if who == "candidate" and guard.VIOLATIONS:
                raise Rejected("sandbox_violation", f"{where}: {guard.VIOLATIONS[0]}") from exc
            raise Rejected(f"{who}_error", f"{where}: {who} raised {type(exc).__name__}: {exc}") from exc
        finally:
            self.run_s += time.perf_counter() - start
        if who == "candidate":
            self._after_candidate(out, args, where, launches, threads, host, work)
        return out

    def _after_candidate(self, out: Any, args: list[Any], where: str, launches: list[Any],
                         threads: set[int], host: Any, work: Any) -> None:
        """Timers, threads, streams, Triton launches and host work of one candidate call."""
        if guard.VIOLATIONS:
            raise Rejected("sandbox_violation", f"{where}: {guard.VIOLATIONS[0]}")
        self.early = hardening.early_copy(out)
        if found := hardening.after_candidate_call(self.seal, launches, threads):
            raise Rejected(found[0], f"{where}: {found[1]}")
        # a result from an earlier run of the same test (TritonBench) launched in that run
        cached = bool(getattr(self.runtime, "served_from_cache", False))
        if work is not None:
            work.cached = cached
        if self.count_launches and not launches and not cached:
            raise Rejected("decoy_no_triton_launch", f"{where}: the candidate launched no Triton kernel "
                           "(computing the result with torch alone is not an optimized kernel)")
        if (self.count_launches and work is not None and not cached
                and (found := hardening.host_work_problem_for(host, work, args))):
            raise Rejected(found[0], f"{where}: {found[1]}")

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
                hardening.scrub_reference(out, args, self.runtime)  # nothing left to read back
                hardening.scrub_released()
            except Exception:  # an original that cannot run alone does no allowed torch work
                work.elements = 0
            self.original_work[case.name] = work.elements
        return self.original_work[case.name]

    def _judge_torch_work(self, case: Case, seed: int, args: list[Any], work: Any, ref_work: Any,
                          where: str) -> None:
        """decoy_torch_compute when the candidate computes with torch more than the original."""
        if work is None or getattr(work, "cached", False):
            return
        inputs = work.input_elements(args)
        if work.elements < TORCH_SHARE_LIMIT * max(inputs, 1):
            return
        original = self._original_work(case, seed, ref_work)
        if work.elements > allowance(original):
            raise Rejected("decoy_torch_compute", f"{where}: the candidate computed with torch "
                           f"outside its Triton kernels ({work.top()}: {work.elements} elements "
                           f"read in region functions, against the original's {original} "
                           f"(+{TORCH_WORK_SLACK:.0%}) and {inputs} input elements); keep the "
                           "computation in the Triton kernels")

    def _outputs(self, out: Any, args: list[Any]) -> Any:
        inplace = self.problem.inplace_outputs
        return (out, [args[i] for i in inplace]) if inplace else out

    def _watch_result(self, out: Any, args: list[Any], before: list[Any], where: str) -> None:
        """Plain tensors, nothing still running, no aliasing, no input mutation."""
        if not_plain := hardening.output_problem(out):
            raise Rejected("output_not_plain_tensor", f"{where}: {not_plain}")
        if hardening.changed_after_return(self.early, out):
            raise Rejected("output_changed_after_return", f"{where}: the result changed after the "
                           "candidate returned (work left running on another thread or stream); "
                           "finish all work before returning")
        inplace = self.problem.inplace_outputs
        if aliased := aliased_indices(out, args, inplace):
            raise Rejected("output_aliases_input", f"{where}: the output shares memory with input "
                           f"argument(s) {aliased}; return a new tensor")
        if mutated := mutated_indices(before, args, inplace):
            raise Rejected("input_mutated", f"{where}: the candidate modified input argument(s) {mutated} "
                           "(declare INPLACE_OUTPUTS if the kernel writes them on purpose)")

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
            ref_out = self._call("reference", ref_args, where, ref_work)
            self._save(files["reference"], "reference", step, self._outputs(ref_out, ref_args))
            if "candidate" in files:  # what the reference left in memory is gone first
                ref_out = hardening.scrub_reference(ref_out, ref_args, self.runtime)
                hardening.scrub_released()
        if "candidate" in files:
            cand_out = self._call("candidate", cand_args, where, work)
            if "reference" in files and candidate_first:
                ref_out = self._call("reference", ref_args, where, ref_work)
                self._save(files["reference"], "reference", step, self._outputs(ref_out, ref_args))
            self._judge_torch_work(case, seed, cand_args, work, ref_work, where)
            self._watch_result(cand_out, cand_args, before, where)
            actual = self._outputs(cand_out, cand_args)
            self._save(files["candidate"], "candidate", step, actual)
            if "reference" in files and not bitwise_equal(self._outputs(ref_out, ref_args), actual):
                self.moved.add(case.name)
        if "candidate_again" in files:
            args = self.runtime.inputs(case, seed)
            again = self._outputs(self._call("candidate", args, where, again=True), args)
            self._save(files["candidate_again"], "candidate_again", step, again)
            if "candidate" in files and not bitwise_equal(actual, again):
                self.moved.add(case.name)

    def again(self, step: dict[str, Any], case: Case) -> None:
        """The reference run once more on identical inputs (how far it moves by itself)."""
        args = self.runtime.inputs(case, int(step["seed"]))
        out = self._call("reference", args, str(step["where"]), again=True)
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


def run_correctness(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: `{problem, editable, device, count_launches, steps, again}` ->
    `{status, reason, message, step, runner_reported}`; the outputs are files."""
    problem = KernelProblem.from_dict(payload["problem"])
    start = time.perf_counter()
    seal = hardening.TimerSeal()  # before the candidate's module code runs
    try:
        runtime = load_runtime(problem, payload.get("editable"), payload["device"])
    except Exception as exc:
        return {"status": "rejected", "reason": "load_error", "step": None,
                "message": f"the candidate could not be loaded: {type(exc).__name__}: {exc}"}
    load_s = time.perf_counter() - start
    runner = CaseRunner(problem, runtime, count_launches=payload.get("count_launches", True), seal=seal)
    report: dict[str, Any] = {"status": "ok"}
    try:
        with guarded_launches():  # on a GPU: zeros past every tensor's end, for both sides
            _run_steps(runner, payload, _cases(problem))
    except Rejected as rej:
        report = {"status": "rejected", "reason": rej.reason, "message": rej.message, "step": runner.current}
    finally:
        write_index(runner.written)
    return {**report, "runner_reported": {"load_s": load_s, "run_s": runner.run_s}}
