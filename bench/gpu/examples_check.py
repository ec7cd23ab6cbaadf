"""Per example on the GPU: correctness, our timing vs triton's do_bench, A/A paired ratio, and
the static profile's registers / shared memory vs what the loaded kernel reports."""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from kernelband.problem.model import Case, KernelProblem

EXAMPLES_DIR = Path("examples")


def example_files(directory: Path = EXAMPLES_DIR) -> list[Path]:
    """The native examples (examples/*.py), sorted by name."""
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def load_example(path: Path) -> KernelProblem:
    """Load one native example (trusted code of this repository, so no sandbox here)."""
    from kernelband.problem import load_problem

    return load_problem(path.read_text(), "native", path.stem)


def scaled_case(case: Case) -> Case | None:
    """`case` grown so one launch moves far more bytes than the L2 holds (timing at scale)."""
    params = dict(case.params)
    keys = set(params)
    if keys == {"n"}:
        params["n"] = 1 << 25
    elif {"m", "n", "k"} <= keys:
        params.update(m=1024, n=1024, k=1024)
    elif {"rows", "cols"} <= keys:
        params.update(rows=4096, cols=4096)
    else:
        return None  # unknown parameter names: no safe way to grow the case
    return replace(case, name=f"{case.name}@scaled", params=params)


def _prepare(runtime: Any, case: Case, fresh: bool) -> Callable[[], Callable[[], Any]]:
    shared = None if fresh else runtime.inputs(case, 0)

    def prepare() -> Callable[[], Any]:
        args = runtime.inputs(case, 0) if fresh else shared
        return lambda: runtime.candidate(args)

    return prepare


def time_case(device: Any, runtime: Any, case: Case, fresh: bool) -> dict[str, Any]:
    """Our median (twice, to see the spread), do_bench's median, and an A/A paired ratio."""
    import triton.testing

    from kernelband.profile.timing import measure, measure_paired

    prepare = _prepare(runtime, case, fresh)
    ours = measure(device, prepare)
    bound = prepare()
    do_bench_ms = float(triton.testing.do_bench(bound, warmup=25, rep=200, return_mode="median"))
    again = measure(device, prepare)
    paired = measure_paired(device, prepare, prepare)
    return {
        "case": case.name, "ours_ms": ours.median_ms, "ours_again_ms": again.median_ms,
        "do_bench_ms": do_bench_ms, "ratio_vs_do_bench": ours.median_ms / do_bench_ms,
        "cv": ours.cv, "reps": ours.reps, "noisy": ours.noisy,
        "aa_paired_ratio": paired.ratio, "aa_ratio_cv": paired.ratio_cv,
    }


def _driver_resources(compiled: Any) -> tuple[int | None, int | None, int | None]:
    """(registers, spills, shared bytes) the CUDA driver reported when it loaded the kernel."""
    if compiled is None:
        return None, None, None
    if getattr(compiled, "n_regs", None) is None and hasattr(compiled, "_init_handles"):
        compiled._init_handles()
    metadata = getattr(compiled, "metadata", None)
    shared = getattr(metadata, "shared", None)
    return getattr(compiled, "n_regs", None), getattr(compiled, "n_spills", None), shared


def static_vs_driver(runtime: Any, case: Case, cc: int) -> list[dict[str, Any]]:
    """Each launch of one case: the AOT static profile beside the loaded kernel's resources."""
    import torch

    from kernelband.profile.launches import capture_launches
    from kernelband.profile.static import static_profile

    args = runtime.inputs(case, 0)
    with capture_launches(execute=True) as records:
        runtime.candidate(args)
    torch.cuda.synchronize()
    rows = []
    for record in records:
        regs, spills, shared = _driver_resources(record.compiled)
        row: dict[str, Any] = {"case": case.name, "kernel": record.kernel_name, "driver_regs": regs,
                               "driver_spills": spills, "driver_shared": shared}
        try:
            profile = static_profile(record, cc)
            row.update(static_regs=profile.registers_per_thread,
                       static_shared=profile.shared_mem_bytes, static_spills=profile.spill_instructions)
        except Exception as exc:  # a static-profile failure is a finding, not a crash
            row["static_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["regs_match"] = row.get("static_regs") == regs
        row["shared_match"] = row.get("static_shared") == shared
        rows.append(row)
    return rows


def _correctness(problem: KernelProblem) -> dict[str, Any]:
    from kernelband.evaluate import evaluate_candidate

    started = time.perf_counter()
    verdict = evaluate_candidate(problem, None, held_out=True, seeds=3)
    return {"correct": verdict.correct, "reason": verdict.reason, "message": verdict.message[:300],
            "cases_checked": verdict.cases_checked, "held_out_checked": verdict.held_out_checked,
            "wall_s": round(time.perf_counter() - started, 2)}


def check_example(path: Path, device: Any, cc: int) -> dict[str, Any]:
    """Every check for one example; an exception in one step is recorded and the rest go on."""
    from kernelband.problem.runtime import load_runtime

    result: dict[str, Any] = {"example": path.stem}
    try:
        problem = load_example(path)
    except Exception as exc:
        return result | {"error": f"load: {exc}"}
    result["correctness"] = _guard(lambda: _correctness(problem))
    with tempfile.TemporaryDirectory(prefix="kb-gpu-validate-") as workdir:
        runtime = load_runtime(problem, None, "cuda", workdir=Path(workdir))
        fresh = bool(problem.inplace_outputs)
        result["timing"] = [_guard(partial(time_case, device, runtime, case, fresh))
                            for case in problem.cases]
        big = scaled_case(problem.cases[0]) if problem.cases else None
        if big is not None:
            result["timing"].append(_guard(partial(time_case, device, runtime, big, fresh)))
        result["static"] = _guard(lambda: [row for case in problem.cases
                                           for row in static_vs_driver(runtime, case, cc)])
    return result


def _guard(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except Exception as exc:  # keep validating the other steps and examples
        return {"error": f"{type(exc).__name__}: {str(exc)[:400]}",
                "trace": traceback.format_exc()[-1200:]}


def run_examples(paths: list[Path]) -> list[dict[str, Any]]:
    """Check every example on the current CUDA device."""
    from kernelband.profile.timing import CudaDevice

    device = CudaDevice()
    cc = device.capability[0] * 10 + device.capability[1]
    results = []
    for path in paths:
        started = time.perf_counter()
        row = check_example(path, device, cc)
        row["wall_s"] = round(time.perf_counter() - started, 1)
        print(f"[examples] {path.stem}: {row['wall_s']} s", flush=True)
        results.append(row)
    return results
