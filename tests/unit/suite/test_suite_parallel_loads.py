"""A suite's problems are loaded several at a time, each with the suite's limits, in order."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kernelband.problem.model import Case, KernelProblem, ProblemLoadError
from kernelband.sandbox import SandboxLimits
from kernelband.sandbox.limits import job_limits
from kernelband.sandbox.problems import load_problem_sandboxed
from kernelband.suite import load_sources, read_directory
from kernelband.suite.sources import SuiteSource

EXAMPLES = Path(__file__).resolve().parents[3] / "kernelband" / "examples" / "tritonbench"


def test_loads_run_at_once_with_the_suites_limits_and_keep_their_order() -> None:
    """Four loads meet at a barrier (only possible if they run at the same time); each sees
    the limits the caller set; a refused file is a failure in its place among the rest."""
    meeting = threading.Barrier(4, timeout=30)
    seen_wall: list[float] = []

    def loader(source: str, format: str, name: str) -> KernelProblem:
        meeting.wait()  # raises BrokenBarrierError if the four loads ran one after another
        seen_wall.append(SandboxLimits.from_settings().wall_s)
        if name == "bad":
            raise ProblemLoadError("no kernel here", 1)
        return KernelProblem(name=name, format=format, source=source, editable="", entry="f",
                             kernel_names=(), cases=(Case("a"),), held_out_cases=())

    sources = [SuiteSource(name, f"# {name}\n") for name in ("a", "bad", "c", "d")]
    with job_limits({"run_s": 7}):
        loaded, failures = load_sources(sources, "tritonbench", loader, parallel=4)
    assert [p.name for p in loaded] == ["a", "c", "d"]
    assert [(f.name, f.reason) for f in failures] == [("bad", "no kernel here")]
    assert seen_wall == [7.0] * 4


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="bundled TritonBench examples not present")
def test_sandboxed_loads_at_once_give_what_loads_one_by_one_give() -> None:
    sources = read_directory(EXAMPLES)
    serial, serial_failures = load_sources(sources, "tritonbench", load_problem_sandboxed,
                                           parallel=1)
    parallel, parallel_failures = load_sources(sources, "tritonbench", load_problem_sandboxed,
                                               parallel=4)
    assert serial and [p.content_hash for p in parallel] == [p.content_hash for p in serial]
    assert [p.to_dict() for p in parallel] == [p.to_dict() for p in serial]
    assert parallel_failures == serial_failures
