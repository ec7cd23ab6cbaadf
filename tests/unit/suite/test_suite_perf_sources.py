"""NAME_perf.py harnesses travel with their TritonBench-G problems (beside them or --perf-dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.problem.model import Case, KernelProblem, problem_hash
from kernelband.suite import attach_perf_dir, load_sources, read_directory
from kernelband.suite.sources import SuiteSource, SuiteSourceError

HARNESS = ("class performance_metrics:\n    def get_input_tensors(self):\n        pass\n"
           "    def to_cuda(self, x):\n        return x\n    def call_op(self, x):\n        pass\n")


def _problem(source: str, format: str, name: str) -> KernelProblem:
    return KernelProblem(name=name, format="tritonbench", source=source, editable="",
                         entry="f", kernel_names=(), cases=(Case("a"),), held_out_cases=())


def test_harness_beside_a_problem_is_paired_not_a_problem(tmp_path: Path) -> None:
    (tmp_path / "add.py").write_text("x = 1\n")
    (tmp_path / "add_perf.py").write_text(HARNESS)
    (tmp_path / "mul.py").write_text("y = 2\n")
    sources = read_directory(tmp_path)
    assert [s.name for s in sources] == ["add", "mul"]
    assert sources[0].perf_source == HARNESS and sources[1].perf_source == ""


def test_perf_dir_supplies_harnesses_by_name(tmp_path: Path) -> None:
    perf = tmp_path / "perf"
    perf.mkdir()
    (perf / "mul_perf.py").write_text(HARNESS)
    sources = attach_perf_dir([SuiteSource("mul", "y = 2\n"), SuiteSource("add", "x")], perf)
    assert sources[0].perf_source == HARNESS and sources[1].perf_source == ""
    with pytest.raises(SuiteSourceError, match="NAME_perf.py"):
        attach_perf_dir(sources, tmp_path / "missing")


def test_loaded_problem_carries_its_harness_and_a_bad_one_is_a_load_failure() -> None:
    good = SuiteSource("mul", "y = 2\n", HARNESS)
    bad = SuiteSource("add", "x = 1\n", "def call_op(x):\n    pass\n")
    loaded, failures = load_sources([good, bad], "tritonbench", _problem)
    assert [p.perf_source for p in loaded] == [HARNESS]
    assert failures[0].name == "add" and "performance harness" in failures[0].reason
    assert loaded[0].content_hash == problem_hash("y = 2\n", "tritonbench", HARNESS)
    assert loaded[0].content_hash != problem_hash("y = 2\n", "tritonbench")
