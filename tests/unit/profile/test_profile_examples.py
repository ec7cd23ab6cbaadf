"""Every bundled example profiles statically for sm_80, sm_89 and sm_90 and gets an estimate."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from kernelband.problem import KernelProblem, load_problem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import GPUS
from kernelband.profile.case_profile import capture_case, profile_case

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NATIVE = sorted(p.stem for p in EXAMPLES.glob("*.py"))
IMPORTED = sorted(f"{d}/{p.stem}" for d in ("kernelbench", "tritonbench") for p in (EXAMPLES / d).glob("*.py"))


def _problem(name: str) -> KernelProblem:
    folder, _, stem = name.rpartition("/")
    return load_problem((EXAMPLES / f"{name}.py").read_text(), folder or "native", stem)


def _check(problem: KernelProblem, target: str) -> None:
    gpu = GPUS[target]
    case = problem.cases[0]
    with tempfile.TemporaryDirectory() as workdir:
        runtime = load_runtime(problem, None, "cpu", workdir=workdir)
        profile = profile_case(capture_case(runtime, case, execute=False), case, gpu)
    for record, static in profile.pairs:
        assert static.cc == gpu.cc and static.registers_per_thread > 0
        assert static.occupancy.occupancy_pct > 0, f"{record.kernel_name} cannot be resident"
        assert static.sass["total"] > 0
    assert profile.estimate.label == "estimated" and 0 < profile.estimate.time_ms < 10.0


def test_examples_exist() -> None:
    assert len(NATIVE) >= 5


@pytest.mark.parametrize("target", ["a100", "rtx4090", "h100"])
@pytest.mark.parametrize("name", NATIVE)
def test_native_example_profiles_on_every_arch(name: str, target: str) -> None:
    _check(_problem(name), target)


@pytest.mark.parametrize("name", IMPORTED)
def test_imported_example_profiles_for_h100(name: str) -> None:
    _check(_problem(name), "h100")
