"""The performance harness: inputs built once, call_op timed alone; otherwise region calls only."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernelband.problem import load_problem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.launches import capture_launches
from kernelband.profile.perf_harness import (
    HarnessError,
    check_harness_source,
    harness_prepares,
    load_harness,
    region_prepare,
)

HARNESS = '''
import sys
import os
sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))
from TritonBench_v1.double_it import double
from performance_utils import Performance_Metrics, do_bench_config
import torch

BUILT = []


class performance_metrics(Performance_Metrics):
    def __init__(self, dtype=None, is_backward=False, **kwargs):
        super().__init__('double_it', dtype=dtype, is_backward=is_backward, **kwargs)

    def get_input_tensors(self):
        self.input_tensors = []
        for i in range(3):
            BUILT.append(i)
            self.input_tensors.append(torch.ones(2 ** (i + 2)))

    def to_cuda(self, input_tensor):
        return input_tensor.cuda()

    def call_op(self, input_tensor):
        return double(input_tensor)
'''


def _kernel_module() -> ModuleType:
    module = ModuleType("double_it")
    module.calls = []  # type: ignore[attr-defined]

    def double(x: torch.Tensor) -> torch.Tensor:
        module.calls.append(x.numel())  # type: ignore[attr-defined]
        return x * 2

    module.double = double  # type: ignore[attr-defined]
    return module


def test_harness_binds_its_kernel_import_to_the_module_under_test(tmp_path: Path) -> None:
    kernels = _kernel_module()
    harness = load_harness(HARNESS, kernels, tmp_path, "child")
    prepares = harness_prepares(harness, "cpu")
    assert [name for name, _ in prepares] == ["perf[0]", "perf[1]", "perf[2]"]
    run = prepares[2][1]()
    assert kernels.calls == []  # building and moving inputs calls nothing of the kernel
    run()
    run()
    assert kernels.calls == [16, 16]  # only call_op runs, on the prepared input
    assert prepares[2][1]() is run  # inputs are built once, not per timed run


RANDOM_HARNESS = HARNESS.replace("torch.ones(2 ** (i + 2))", "torch.rand(2 ** (i + 2))")


def test_a_parent_harness_times_the_same_host_inputs_as_its_child(tmp_path: Path) -> None:
    child_kernels, parent_kernels = _kernel_module(), _kernel_module()
    child = load_harness(RANDOM_HARNESS, child_kernels, tmp_path, "child")
    child_prepares = harness_prepares(child, "cpu")
    parent = load_harness(RANDOM_HARNESS, parent_kernels, tmp_path, "parent")
    parent_prepares = harness_prepares(parent, "cpu", inputs_from=child)
    # the sweep draws unseeded random inputs: without sharing, parent and child would differ
    for (_, child_prepare), (_, parent_prepare) in zip(child_prepares, parent_prepares,
                                                       strict=True):
        assert torch.equal(child_prepare()(), parent_prepare()())
    assert len(child_kernels.calls) == len(parent_kernels.calls) == 3  # each times its own op


def test_harness_without_the_class_is_refused_with_what_to_define() -> None:
    with pytest.raises(HarnessError, match="class performance_metrics"):
        check_harness_source("def call_op(x):\n    return x\n")
    with pytest.raises(HarnessError, match="to_cuda"):
        check_harness_source("class performance_metrics:\n    def call_op(self, x):\n"
                             "        pass\n    def get_input_tensors(self):\n        pass\n")


TRITONBENCH = (Path(__file__).parent / "fixtures" / "copy_tritonbench.py").read_text()


def test_without_harness_only_the_region_calls_are_replayed(tmp_path: Path) -> None:
    problem = load_problem(TRITONBENCH, "tritonbench", "copy", workdir=tmp_path, device="cpu")
    runtime = load_runtime(problem, None, "cpu", workdir=tmp_path)
    run = region_prepare(problem, runtime, "candidate", "cpu")()
    created = len(runtime.candidate_module.CREATED)
    with capture_launches() as launches:
        run()
    assert len(runtime.candidate_module.CREATED) == created  # the test's input creation: untimed
    assert [r.kernel_name for r in launches] == ["copy_kernel", "copy_kernel"]  # both region calls


def test_profiling_each_case_runs_the_test_for_that_case(tmp_path: Path) -> None:
    from kernelband.profile.case_profile import capture_case

    problem = load_problem(TRITONBENCH, "tritonbench", "copy", workdir=tmp_path, device="cpu")
    runtime = load_runtime(problem, None, "cpu", workdir=tmp_path)
    for case in problem.cases:  # no case is answered from an earlier run's results
        assert capture_case(runtime, case, execute=True)
