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
    draw_inputs,
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


def _seeded(seed: int = 7) -> None:
    torch.manual_seed(seed)


def test_a_runner_on_a_gpu_draws_the_inputs_on_its_device_once(tmp_path: Path) -> None:
    # "meta" stands for the GPU here: tensors the harness makes without naming a device land on
    # the factory device, and harness_prepares takes them instead of drawing again
    harness = load_harness(RANDOM_HARNESS, _kernel_module(), tmp_path, "child")
    built = harness.get_input_tensors.__globals__["BUILT"]
    _seeded()
    assert draw_inputs(harness, "cpu", _seeded, factory_device="meta") == "device"
    assert [t.device.type for t in harness.input_tensors] == ["meta"] * 3
    assert [name for name, _ in harness_prepares(harness, "cpu", drawn=True)] == ["perf[0]", "perf[1]", "perf[2]"]
    assert built == [0, 1, 2]  # drawn once


HOST_ONLY_HARNESS = HARNESS.replace(
    "            self.input_tensors.append(torch.ones(2 ** (i + 2)))",
    "            x = torch.rand(2 ** (i + 2))\n"
    "            self.input_tensors.append(torch.from_numpy(x.numpy().copy()))  # host tensors only")


def test_a_harness_written_for_host_tensors_is_drawn_on_the_host_from_the_same_seed(tmp_path: Path) -> None:
    assert "x.numpy()" in HOST_ONLY_HARNESS
    plain = load_harness(HOST_ONLY_HARNESS, _kernel_module(), tmp_path, "plain")
    _seeded()
    assert draw_inputs(plain, "cpu", _seeded, factory_device=None) == "host"
    tried = load_harness(HOST_ONLY_HARNESS, _kernel_module(), tmp_path, "tried")
    _seeded()
    torch.rand(5)  # the failed device draw may have used the generator: the retry reseeds
    assert draw_inputs(tried, "cpu", _seeded, factory_device="meta") == "host"
    assert len(tried.input_tensors) == 3  # not the failed attempt's tensors and the retry's
    for ours, theirs in zip(tried.input_tensors, plain.input_tensors, strict=True):
        assert ours.device.type == "cpu" and torch.equal(ours, theirs)


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
