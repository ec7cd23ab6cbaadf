"""The correctness and anti-cheat checks, run inside the sandbox child (imports untrusted code).

`evaluate_target(payload) -> dict` is the sandbox target behind `evaluate_candidate`.
"""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from kernelband.evaluate import hardening  # issue 18: integrity and host-work checks
from kernelband.evaluate.compare import (
    aliased_indices,
    bitwise_equal,
    compare_results,
    mutated_indices,
    snapshot,
)
from kernelband.evaluate.torch_work import TORCH_WORK_SLACK, allowance
from kernelband.evaluate.verdict import Verdict
from kernelband.problem import selfcheck
from kernelband.problem.cuda_guard import guarded_launches
from kernelband.problem.model import Case, KernelProblem
from kernelband.sandbox.device import ORIGINAL_MOVED


class Rejected(Exception):
    """Raised inside the checks to stop at the first failure."""

    def __init__(self, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.reason, self.message, self.details = reason, message, details


def _capture() -> AbstractContextManager[list[Any]]:
    from kernelband.profile.launches import capture_launches

    return capture_launches()


def _torch_work(region: Any = None) -> Any:
    from kernelband.evaluate.torch_work import TorchWork

    return TorchWork(region)


# A candidate whose torch calls in its region functions (outside its Triton launches) read at
# least this many elements per input element, and more than the original's own torch work
# (plus TORCH_WORK_SLACK), computed the result with torch, not with its kernel. An epilogue on
# the output (a bias add after a Triton matmul) reads less and passes.
TORCH_SHARE_LIMIT = 1.0


def _violations() -> list[str]:
    from kernelband.sandbox import guard

    return guard.VIOLATIONS


class CaseChecker:
    """Runs the reference and the candidate on fresh inputs and checks what they did."""

    def __init__(self, problem: KernelProblem, runtime: Any, count_launches: bool = True,
                 seal: Any = None) -> None:
        self.problem, self.runtime = problem, runtime
        self.count_launches = count_launches
        self.seal = seal  # issue 18: TimerSeal taken before the candidate was loaded
        self.run_s = 0.0
        self.worst_err = 0.0
        self.early: Any = None  # issue 18: the candidate's result as it was at return
        self.original_work: dict[str, int] = {}  # case name -> the original's torch work
        # case name -> how far the original moved when run again during the checks
        self.original_spread: dict[str, float] = {}
        if hasattr(runtime, "share_runs"):
            runtime.share_runs = True  # one test run answers every case of a seed

    def _call(self, who: str, args: list[Any], where: str, work: Any = None, again: bool = False) -> Any:
        fn = self.runtime.candidate if who == "candidate" else self.runtime.reference
        if again:  # the determinism re-run (TritonBench: one re-run of the test per seed)
            fn = getattr(self.runtime, "candidate_again", fn)
        launches: list[Any] = []
        watched = who == "candidate" and self.count_launches
        # The reference runs under the same launch capture as the candidate: a capture keeps
        # each launch's arguments alive until the call returns, and a kernel that reads memory
        # it never wrote must find the same memory layout in both runs.
        context = _capture() if self.count_launches else nullcontext(launches)
        host: Any = hardening.host_work(args, self.runtime) if watched else nullcontext()  # issue 18
        threads = hardening.live_threads()
        start = time.perf_counter()
        try:
            with context as launches, (work if work is not None else nullcontext()), host:
                out = fn(args)
        except Rejected:
            raise
        except Exception as exc:
            if who == "candidate" and _violations():
                raise Rejected("sandbox_violation", f"{where}: {_violations()[0]}") from exc
            raise Rejected(f"{who}_error", f"{where}: {who} raised {type(exc).__name__}: {exc}") from exc
        finally:
            self.run_s += time.perf_counter() - start
        if who == "candidate" and _violations():
            raise Rejected("sandbox_violation", f"{where}: {_violations()[0]}")
        if who == "candidate":  # issue 18: the result as it was at return; timers, threads, streams
            self.early = hardening.early_copy(out)
            if found := hardening.after_candidate_call(self.seal, launches, threads):
                raise Rejected(found[0], f"{where}: {found[1]}")
        # a result from an earlier run of the same test (TritonBench) launched in that run
        cached = bool(getattr(self.runtime, "served_from_cache", False))
        if work is not None:
            work.cached = cached
        if watched and not launches and not cached:
            raise Rejected("decoy_no_triton_launch", f"{where}: the candidate launched no Triton kernel "
                           "(computing the result with torch alone is not an optimized kernel)")
        if (watched and work is not None and not cached
                and (found := hardening.host_work_problem_for(host, work, args))):  # issue 18
            raise Rejected(found[0], f"{where}: {found[1]}")
        return out

    def _works(self) -> tuple[Any, Any]:
        """TorchWork for the candidate's and (TritonBench) the original's region, or Nones."""
        if not self.count_launches:
            return None, None
        cand = _torch_work(self.runtime.candidate_region)
        ref = _torch_work(self.runtime.original_region) if self.runtime.reference_is_original else None
        return cand, ref

    def _original_work(self, case: Case, seed: int, measured: Any) -> int:
        """Elements the original kernel reads with torch in its region functions, per case."""
        if measured is not None and not getattr(measured, "cached", False):
            self.original_work.setdefault(case.name, measured.elements)
        if case.name not in self.original_work:
            work = _torch_work(self.runtime.original_region)
            args = self.runtime.inputs(case, seed)
            try:
                with work:
                    self.runtime.original(args)
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

    def check(self, case: Case, seed: int, where: str, candidate_first: bool, determinism: bool) -> None:
        """One (case, seed): both orders over the run, every anti-cheat check."""
        cand_args = self.runtime.inputs(case, seed)
        before = snapshot(cand_args)
        ref_args = self.runtime.inputs(case, seed)
        work, ref_work = self._works()
        if candidate_first:
            cand_out = self._call("candidate", cand_args, where, work)
            ref_out = self._call("reference", ref_args, where, ref_work)
        else:
            ref_out = self._call("reference", ref_args, where, ref_work)
            ref_out = hardening.scrub_reference(ref_out, ref_args, self.runtime)  # issue 18
            hardening.scrub_released()  # what the reference's dropped result held
            cand_out = self._call("candidate", cand_args, where, work)
        self._judge_torch_work(case, seed, cand_args, work, ref_work, where)
        if not_plain := hardening.output_problem(cand_out):  # issue 18: plain tensors only
            raise Rejected("output_not_plain_tensor", f"{where}: {not_plain}")
        if hardening.changed_after_return(self.early, cand_out):  # issue 18: threads, streams
            raise Rejected("output_changed_after_return", f"{where}: the result changed after the "
                           "candidate returned (work left running on another thread or stream); "
                           "finish all work before returning")
        inplace = self.problem.inplace_outputs
        if aliased := aliased_indices(cand_out, cand_args, inplace):
            raise Rejected("output_aliases_input", f"{where}: the output shares memory with input "
                           f"argument(s) {aliased}; return a new tensor")
        if mutated := mutated_indices(before, cand_args, inplace):
            raise Rejected("input_mutated", f"{where}: the candidate modified input argument(s) {mutated} "
                           "(declare INPLACE_OUTPUTS if the kernel writes them on purpose)")
        expected, actual = self._outputs(ref_out, ref_args), self._outputs(cand_out, cand_args)
        found = compare_results(expected, actual, self.problem.tolerance)
        if found and not self._within_original_spread(case, seed, where, expected, actual, found.reason):
            detail = found.detail
            if where.startswith("held-out"):  # shapes of held-out cases must not reach a generator
                detail = f"max_abs_err {found.max_abs_err:.3g}" if found.max_abs_err is not None else "differs"
            moved_at_load = self.problem.self_spread.get(case.name, 0.0) is None  # NaN/Inf moved
            if moved_at_load or math.isinf(self.original_spread.get(case.name, 0.0)):
                detail += f" ({ORIGINAL_MOVED}: its result depends on memory it never wrote or " \
                          "on a race)"
            raise Rejected(found.reason, f"{where}, {found.where}: {detail}", max_abs_err=found.max_abs_err)
        if determinism and not self.problem.allow_nondeterminism:
            self._check_determinism(case, seed, where, actual, expected)

    def _rerun_original(self, case: Case, seed: int, where: str, expected: Any) -> float:
        """How far the reference moves from `expected` when it runs again on identical inputs
        (0: not at all; inf: NaN/Inf positions or shapes moved). The load-time self-check
        (selfcheck.py) runs the original a few times; a kernel that reads memory it never wrote
        or races may still agree with itself there and disagree here."""
        if case.name not in self.original_spread:
            args = self.runtime.inputs(case, seed)
            again = self._outputs(self._call("reference", args, where), args)
            self.original_spread[case.name] = selfcheck.spread(expected, again)
        return self.original_spread[case.name]

    def _within_original_spread(self, case: Case, seed: int, where: str, expected: Any,
                                actual: Any, reason: str) -> bool:
        """A wrong_result within SPREAD_FACTOR x the original's own movement is not the
        candidate's fault: the problem is nondeterministic (the verdict says so)."""
        if reason != "wrong_result":
            return False
        moved = self._rerun_original(case, seed, where, expected)
        if not 0.0 < moved < math.inf:
            return False
        wider = selfcheck.SPREAD_FACTOR * moved
        base = self.problem.tolerance

        def tolerance(dtype: str) -> tuple[float, float]:
            atol, rtol = base(dtype)
            return max(atol, wider), rtol

        return compare_results(expected, actual, tolerance) is None

    def _check_determinism(self, case: Case, seed: int, where: str, first: Any,
                           expected: Any = None) -> None:
        # the same module run again (the reference is another import of the file: an autotuner
        # there may pick another config, so it can differ in the last bits and still be right)
        args = self.runtime.inputs(case, seed)
        again = self._outputs(self._call("candidate", args, where, again=True), args)
        if not bitwise_equal(first, again) and not (
                expected is not None and self._rerun_original(case, seed, where, expected) > 0):
            raise Rejected("nondeterministic", f"{where}: two runs on identical inputs differ "
                           "(set ALLOW_NONDETERMINISM = True if the kernel is meant to, e.g. atomics)")


def _public(problem: KernelProblem, case: str) -> str:
    """A case's name for a message; held-out names never appear (they may reach a generator)."""
    return "a held-out case" if any(c.name == case for c in problem.held_out_cases) else case


def _case_plan(problem: KernelProblem, held_out: bool) -> list[tuple[str, Case]]:
    plan = [(f"case {c.name}", c) for c in problem.cases]
    if held_out:
        # held-out names and shapes never appear in messages (they may reach a generator)
        plan += [(f"held-out case #{i + 1}", c) for i, c in enumerate(problem.held_out_cases)]
    return plan


def _run_plan(checker: CaseChecker, plan: list[tuple[str, Case]], seeds: int, base_seed: int) -> int:
    checks = 0
    for label, case in plan:
        for k in range(seeds):
            where = f"{label}, seed {k}"
            # alternate who runs first, so a result left behind by the other cannot be reused
            checker.check(case, base_seed + k, where, candidate_first=(checks % 2 == 0), determinism=(k == 0))
            checks += 1
    return checks


def evaluate_target(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: a Verdict as a dict."""
    problem = KernelProblem.from_dict(payload["problem"])
    seeds, held_out, base_seed = int(payload["seeds"]), bool(payload["held_out"]), int(payload["base_seed"])
    plan = _case_plan(problem, held_out)
    counts = {"seeds": seeds, "cases_checked": 0, "held_out_checked": 0}
    start = time.perf_counter()
    seal = hardening.TimerSeal()  # issue 18: before the candidate's module code runs
    try:
        from kernelband.problem.runtime import load_runtime

        runtime = load_runtime(problem, payload.get("editable"), payload["device"])
    except Exception as exc:
        return Verdict.reject("load_error", f"the candidate could not be loaded: {type(exc).__name__}: {exc}",
                              **counts).to_dict()
    load_s = time.perf_counter() - start
    checker = CaseChecker(problem, runtime, count_launches=payload.get("count_launches", True), seal=seal)
    try:
        with guarded_launches():  # on a GPU: zeros past every tensor's end, for both sides
            checks = _run_plan(checker, plan, seeds, base_seed)
    except Rejected as rej:
        details = {"load_s": load_s, "run_s": checker.run_s, "base_seed": base_seed, **rej.details}
        return Verdict.reject(rej.reason, rej.message, details=details, **counts).to_dict()
    n_held = sum(1 for label, _ in plan if label.startswith("held-out"))
    message = f"correct on {len(plan)} cases x {seeds} seeds ({checks} checks)"
    if moved := {n: v for n, v in checker.original_spread.items() if v > 0}:
        message += ("; nondeterministic: the original disagreed with itself when run again ("
                    + ", ".join(f"{_public(problem, n)} by {v:.3g}" for n, v in sorted(moved.items()))
                    + f"), compared within {selfcheck.SPREAD_FACTOR:g}x that")
    return Verdict(
        correct=True, reason="ok", message=message,
        cases_checked=len(plan), seeds=seeds, held_out_checked=n_held,
        flags=("nondeterminism_allowed",) if problem.allow_nondeterminism or moved else (),
        details={"load_s": load_s, "run_s": checker.run_s, "base_seed": base_seed, "checks": checks},
    ).to_dict()
