"""Cold and warm static-profile caches give identical profiles and estimates (the scheduler relies
on identical decisions after a restart), and the cache key follows what changes a compile."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kernelband.problem import KernelProblem, load_problem
from kernelband.problem.runtime import load_runtime
from kernelband.profile.archs import resolve_target
from kernelband.profile.case_profile import capture_case, profile_case
from kernelband.profile.launches import LaunchRecord, capture_launches
from kernelband.profile.static import cache_key, clear_memory_cache, static_profile

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NATIVE = sorted(p.stem for p in EXAMPLES.glob("*.py"))
VOLATILE = ("compile_s", "cached")  # wall time of the compile, and whether it came from the cache


@pytest.fixture()
def fresh_cache_dir(tmp_path: Path) -> Iterator[Path]:
    """A private, empty static-profile cache (Triton's own compile cache stays warm)."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(tmp_path)
    clear_memory_cache()
    yield tmp_path / "kernelband-static-profile"
    clear_memory_cache()
    if previous is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = previous


def _snapshot(problem: KernelProblem, target: str) -> list[dict[str, Any]]:
    """Every launch's static profile (minus volatile fields) and estimate, for every case."""
    gpu = resolve_target(target)
    out = []
    with tempfile.TemporaryDirectory() as workdir:
        runtime = load_runtime(problem, None, "cpu", workdir=workdir)
        for case in problem.cases:
            profile = profile_case(capture_case(runtime, case, execute=False), case, gpu)
            for (_, static), estimate in zip(profile.pairs, profile.estimate.launches, strict=True):
                fields = {k: v for k, v in static.to_dict().items() if k not in VOLATILE}
                out.append({"case": case.name, "static": fields, "estimate": estimate.to_dict(),
                            "cached": static.cached})
    return out


@pytest.mark.parametrize("target", ["h100", "cpu"])
@pytest.mark.parametrize("name", NATIVE)
def test_cold_and_warm_cache_give_identical_estimates(name: str, target: str, fresh_cache_dir: Path) -> None:
    problem = load_problem((EXAMPLES / f"{name}.py").read_text(), "native", name)
    cold = _snapshot(problem, target)
    assert fresh_cache_dir.is_dir() and any(fresh_cache_dir.iterdir())
    clear_memory_cache()  # a restart: only the disk cache is left
    warm = _snapshot(problem, target)
    assert all(w["cached"] for w in warm)
    strip = [{k: v for k, v in s.items() if k != "cached"} for s in cold]
    assert strip == [{k: v for k, v in s.items() if k != "cached"} for s in warm]


def _dry_add(kernels: ModuleType) -> LaunchRecord:
    data = torch.randn(4096)
    with capture_launches(execute=False) as records:
        kernels.add(data, data, 1024, 4)
    return records[0]


def test_cache_key_follows_fp_fusion_setting(kernels: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    record = _dry_add(kernels)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    fused = cache_key(record, 90)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert cache_key(record, 90) != fused  # a profile compiled without FMA is not served as fused


def test_warm_entry_matches_a_recompile(kernels: ModuleType, fresh_cache_dir: Path) -> None:
    record = _dry_add(kernels)
    cold = static_profile(record, 80)
    clear_memory_cache()
    warm = static_profile(record, 80)
    assert warm.cached and not cold.cached
    volatile = {k: None for k in VOLATILE}
    assert {**cold.to_dict(), **volatile} == {**warm.to_dict(), **volatile}


@pytest.mark.parametrize("cc", [80, 90])
def test_matmul_shared_memory_is_what_the_launch_allocates(kernels: ModuleType, cc: int) -> None:
    """The driver allocates Triton's dynamic `shared` (plus the cubin's own static shared memory);
    on sm_90 ptxas also reports the 1 KiB reserved per block, which occupancy adds separately."""
    from kernelband.profile.sass import parse_resource_usage
    from kernelband.profile.static import _compile, _disassemble

    a = torch.randn(64, 64, dtype=torch.float16)
    with capture_launches(execute=False) as records:
        kernels.matmul(a, a, 64, 64, 32, 4, 1)
    compiled, _ = _compile(records[0], cc)
    usage = parse_resource_usage(_disassemble(compiled.asm["cubin"]))
    assert usage is not None
    assert usage.shared_bytes == (1024 if cc >= 90 else 0)  # the reserved KiB, sm_90 only
    assert static_profile(records[0], cc).shared_mem_bytes == int(compiled.metadata.shared) > 0
