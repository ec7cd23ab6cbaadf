"""Run a problem's inputs, reference and candidate (sandbox child only).

`load_runtime` imports the original module and the candidate module (the original file with
its editable region replaced) as two separate modules from files in `workdir`. Every call runs
inside `device_scope(device)`, so problems written for `cuda` run on the CPU interpreter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelband.problem.devices import device_scope, use_interpreter_for
from kernelband.problem.editable import region_offset
from kernelband.problem.fair import fair_scope
from kernelband.problem.model import Case, CaseInputs, KernelProblem, ProblemLoadError
from kernelband.problem.region_scope import RegionScope
from kernelband.problem.tritonbench import run_test, runnable_source, test_function_name
from kernelband.problem.usercode import import_module_file

# Both KernelBench models are built after seeding with this, as KernelBench's own harness does.
WEIGHT_SEED = 42


@contextlib.contextmanager
def _both(first: AbstractContextManager[Any], second: AbstractContextManager[Any]) -> Iterator[None]:
    with first, second:
        yield


class ProblemRuntime:
    """Fresh inputs, the reference result and the candidate result for one case."""

    def __init__(
        self, problem: KernelProblem, original: ModuleType, candidate: ModuleType, device: str
    ) -> None:
        self.problem = problem
        self.original_module = original
        self.candidate_module = candidate
        self.device = device
        self._last: tuple[Case, int] | None = None
        # the editable region's lines in each imported module (set by load_runtime)
        self.original_region: RegionScope | None = None
        self.candidate_region: RegionScope | None = None

    # True when reference() runs the original kernel itself (TritonBench: the test is both)
    reference_is_original = False

    def inputs(self, case: Case, seed: int) -> list[Any]:
        """Fresh arguments for `case`, seeded by `seed` (may be empty, see subclasses)."""
        raise NotImplementedError("Must provide inputs(case, seed)")

    def reference(self, args: list[Any]) -> Any:
        """The reference result for `args`."""
        raise NotImplementedError("Must provide reference(args)")

    def candidate(self, args: list[Any]) -> Any:
        """The candidate kernel's result for `args`."""
        raise NotImplementedError("Must provide candidate(args)")

    def original(self, args: list[Any]) -> Any:
        """The original kernel's result for `args` (what a candidate's torch work is weighed
        against)."""
        raise NotImplementedError("Must provide original(args)")

    def _fair(self, args: list[Any]) -> Any:
        """Device remapping and a fair scope seeded like the inputs `args` were built with."""
        return _both(device_scope(self.device), fair_scope(self._case_of(args)[1]))

    def _remember(self, args: list[Any], case: Case, seed: int) -> CaseInputs:
        self._last = (case, seed)
        return CaseInputs(args, case, seed)

    def _case_of(self, args: list[Any]) -> tuple[Case, int]:
        """The case/seed `args` were built for (a plain list copy: the last inputs() call)."""
        if isinstance(args, CaseInputs):
            return args.case, args.seed
        if self._last is None:
            raise RuntimeError("call inputs(case, seed) before reference() or candidate()")
        return self._last


class NativeRuntime(ProblemRuntime):
    """Native format: make_inputs / reference / entry."""

    def inputs(self, case: Case, seed: int) -> list[Any]:
        with device_scope(self.device):
            torch.manual_seed(seed)
            args = self.original_module.make_inputs(case, self.device, seed)
        if not isinstance(args, list | tuple):
            raise TypeError(
                f"make_inputs must return a list of arguments, got {type(args).__name__}"
            )
        return self._remember(list(args), case, seed)

    def reference(self, args: list[Any]) -> Any:
        module = self.original_module
        fn = getattr(module, "reference", None) or getattr(module, self.problem.entry)
        with self._fair(args):
            return fn(*args)

    def candidate(self, args: list[Any]) -> Any:
        with self._fair(args):
            return getattr(self.candidate_module, self.problem.entry)(*args)

    def original(self, args: list[Any]) -> Any:
        with self._fair(args):
            return getattr(self.original_module, self.problem.entry)(*args)


class TritonBenchRuntime(ProblemRuntime):
    """TritonBench-G: the test builds its own inputs; results are picked by case name."""

    def __init__(
        self, problem: KernelProblem, original: ModuleType, candidate: ModuleType, device: str
    ) -> None:
        super().__init__(problem, original, candidate, device)
        self.test_name = test_function_name(problem.source)
        self._unused: dict[tuple[str, int], dict[str, Any]] = {}
        self.served_from_cache = False  # the last result came from an earlier run of the test
        # the checker turns this on: one run of the test answers every case of a seed (the
        # profile paths capture each case's launches, so they run the test every time)
        self.share_runs = False

    def inputs(self, case: Case, seed: int) -> list[Any]:
        return self._remember([], case, seed)

    def _run(self, module: ModuleType, args: list[Any], who: str) -> Any:
        case, seed = self._case_of(args)
        # One run of the test returns every case: each result is handed out once, so the next
        # case of the same seed reuses the run while a repeat of this case runs the test again.
        unused = self._unused.get((who, seed), {}) if self.share_runs else {}
        self.served_from_cache = case.name in unused
        if not self.served_from_cache:
            unused = dict(run_test(module, self.test_name, seed, self.device))
            self._unused[(who, seed)] = unused
        results = unused
        if case.name not in results:
            raise KeyError(
                f"the {who} test returned no result {case.name!r}; it returned {list(results)}"
            )
        return results.pop(case.name)

    reference_is_original = True

    def reference(self, args: list[Any]) -> Any:
        return self._run(self.original_module, args, "original")

    def original(self, args: list[Any]) -> Any:
        return self.reference(args)

    def candidate(self, args: list[Any]) -> Any:
        return self._run(self.candidate_module, args, "candidate")

    def forget_runs(self) -> None:
        """Drop the results of earlier test runs not yet handed out (and their memory)."""
        self._unused.clear()

    def candidate_again(self, args: list[Any]) -> Any:
        """The candidate's result from a second run of the test (the determinism check): one
        re-run answers every case of a seed, apart from the run `candidate` hands out."""
        return self._run(self.candidate_module, args, "candidate again")


def _to_device(value: Any, device: str, dtype: str) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    value = value.to(device)
    return value.to(getattr(torch, dtype)) if value.is_floating_point() else value


class KernelBenchRuntime(ProblemRuntime):
    """KernelBench: Model is the reference, ModelNew the candidate, same weights."""

    def __init__(
        self, problem: KernelProblem, original: ModuleType, candidate: ModuleType, device: str
    ) -> None:
        super().__init__(problem, original, candidate, device)
        self._models: dict[str, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._originals: dict[str, torch.nn.Module] = {}

    def _apply_params(self, case: Case) -> None:
        # case params override module constants that get_inputs()/get_init_inputs() read
        for module in (self.original_module, self.candidate_module):
            for key, value in case.params.items():
                setattr(module, key, value)

    def _build(self, case: Case) -> tuple[torch.nn.Module, torch.nn.Module]:
        self._apply_params(case)
        with device_scope(self.device):
            init = list(self.original_module.get_init_inputs())
            torch.manual_seed(WEIGHT_SEED)
            ref = self.original_module.Model(*init)
            torch.manual_seed(WEIGHT_SEED)
            new = self.candidate_module.ModelNew(*init)
        _copy_matching_state(ref, new)
        dtype = getattr(torch, case.dtype)
        return ref.to(self.device, dtype), new.to(self.device, dtype)

    def models(self, case: Case) -> tuple[torch.nn.Module, torch.nn.Module]:
        """(Model, ModelNew) for `case`, built once with the same weights."""
        if case.name not in self._models:
            self._models[case.name] = self._build(case)
        return self._models[case.name]

    def _pair(self, args: list[Any]) -> tuple[torch.nn.Module, torch.nn.Module]:
        return self.models(self._case_of(args)[0])

    def inputs(self, case: Case, seed: int) -> list[Any]:
        self._apply_params(case)
        with device_scope(self.device):
            torch.manual_seed(seed)
            args = list(self.original_module.get_inputs())
        return self._remember([_to_device(a, self.device, case.dtype) for a in args], case, seed)

    def reference(self, args: list[Any]) -> Any:
        model = self._pair(args)[0]
        with self._fair(args), torch.no_grad():
            return model(*args)

    def candidate(self, args: list[Any]) -> Any:
        model = self._pair(args)[1]
        with self._fair(args), torch.no_grad():
            return model(*args)

    def original(self, args: list[Any]) -> Any:
        case = self._case_of(args)[0]
        if case.name not in self._originals:
            self._apply_params(case)
            with device_scope(self.device):
                init = list(self.original_module.get_init_inputs())
                torch.manual_seed(WEIGHT_SEED)
                model = self.original_module.ModelNew(*init)
            _copy_matching_state(self.models(case)[0], model)
            self._originals[case.name] = model.to(self.device, getattr(torch, case.dtype))
        with self._fair(args), torch.no_grad():
            return self._originals[case.name](*args)


def _copy_matching_state(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Give ModelNew the reference's weights where names and shapes agree."""
    wanted = target.state_dict()
    shared = {
        k: v for k, v in source.state_dict().items() if k in wanted and wanted[k].shape == v.shape
    }
    if shared:
        target.load_state_dict(shared, strict=False)


_RUNTIMES: dict[str, type[ProblemRuntime]] = {
    "native": NativeRuntime,
    "tritonbench": TritonBenchRuntime,
    "kernelbench": KernelBenchRuntime,
}


def _runnable(problem: KernelProblem, source: str) -> str:
    return runnable_source(source) if problem.format == "tritonbench" else source


def _in_region_terms(
    problem: KernelProblem, region: str, exc: ProblemLoadError
) -> ProblemLoadError:
    """A candidate import error, its line counted inside the region when it falls there."""
    offset = region_offset(problem.source, problem.format)
    if exc.line is not None and offset < exc.line <= offset + len(region.splitlines()):
        reason = f"candidate: {exc.reason}; the line is counted from the start of the region"
        return ProblemLoadError(reason, exc.line - offset)
    return ProblemLoadError(f"candidate: {exc.reason}", exc.line)


def load_runtime(
    problem: KernelProblem,
    editable: str | None,
    device: str,
    *,
    workdir: str | Path | None = None,
    original: ModuleType | None = None,
) -> ProblemRuntime:
    """Import the original and the candidate (`editable=None`: the original kernel);
    `original`: the original's module, imported by an earlier `load_runtime` of this process."""
    use_interpreter_for(device)
    folder = Path(workdir or Path.cwd())
    if original is None:
        original = import_module_file(_runnable(problem, problem.source), "original", folder, device)
    spliced = problem.source if editable is None else problem.splice(editable)
    try:
        candidate = import_module_file(_runnable(problem, spliced), "candidate", folder, device)
    except ProblemLoadError as exc:
        raise _in_region_terms(problem, editable or problem.editable, exc) from exc
    runtime = _RUNTIMES[problem.format](problem, original, candidate, device)
    offset = region_offset(problem.source, problem.format)
    for role, module, region in (("original", original, problem.editable),
                                 ("candidate", candidate, editable or problem.editable)):
        scope = RegionScope(str(module.__file__), offset + 1, offset + len(region.splitlines()))
        setattr(runtime, f"{role}_region", scope)
    return runtime
