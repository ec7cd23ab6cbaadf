"""Where one pull's GPU time goes: the profile step's check and measurement, timed and profiled.

For each scaled example (bench/gpu/scaled.py) and one rules-generator child of it, on this
node's GPU: the sandboxed correctness check (3 seeds) and the sandboxed measurement (paired with
the original, with its Nsight Compute pass), each run twice (the first run also fills Triton's
cache), then the same two bodies in this process under cProfile, then the Nsight Compute pass
alone, warm (forked from the ncu-launched zygote) and fresh (a new interpreter under ncu). The examples are this project's own trusted files, so
running their bodies outside the sandbox here is safe; candidates from users never are.

    python -m bench.gpu.step_profile --out DIR [--only softmax,matmul] [--path-file]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gpu.scaled import write_scaled_examples

ROOT = Path(__file__).resolve().parents[2]


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _profiled(fn: Any, top: int = 25) -> tuple[float, str]:
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    fn()
    profiler.disable()
    wall = time.perf_counter() - start
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return wall, out.getvalue()


def child_start_s() -> dict[str, float]:
    """A fresh interpreter importing torch and triton, and then initialising CUDA."""
    code = ("import time; t=time.perf_counter(); import torch, triton; a=time.perf_counter()-t; "
            "torch.cuda.init(); torch.empty(1, device='cuda'); "
            "print(a, time.perf_counter()-t-a)")
    imports, cuda = map(float, subprocess.check_output([sys.executable, "-c", code]).split())
    return {"import_torch_triton_s": imports, "cuda_init_s": cuda}


def profile_example(path: Path, target: str) -> dict[str, Any]:
    """Sandboxed timings and in-process profiles of one child of `path`."""
    from kernelband.evaluate import evaluate_candidate, judge
    from kernelband.generate.rules.generator import candidate_variants
    from kernelband.profile import measure_candidate
    from kernelband.profile.measure import measure_candidate_task
    from kernelband.runner.correctness import run_correctness
    from kernelband.sandbox import load_problem_sandboxed

    problem = load_problem_sandboxed(path.read_text(), "native", path.stem)
    child = candidate_variants(problem.editable, "reordering")[0][1]
    row: dict[str, Any] = {"example": path.stem}
    for run in ("first", "second"):
        verdict, row[f"check_{run}_s"] = _timed(lambda: evaluate_candidate(
            problem, child, held_out=False, seeds=3, device=None))
        row[f"check_{run}_sandbox_s"] = verdict.details.get("sandbox_wall_s")
        row[f"check_{run}_warm"] = verdict.details.get("warm")
        row["correct"] = verdict.correct
        _, row[f"measure_{run}_s"] = _timed(lambda: measure_candidate(
            problem, child, target, parent_editable=problem.editable))
    # the candidate's runner in this process (the judge's comparison is not profiled here)
    entries = judge.plan(problem, held_out=False, seeds=3, base_seed=7)
    payload = {"problem": problem.to_dict(), "editable": child, "device": "cuda", "count_launches": True,
               "steps": judge.steps(problem, entries, ("candidate",))}
    with tempfile.TemporaryDirectory(prefix="kb-step-profile-") as workdir, contextlib.chdir(workdir):
        row["check_inprocess_s"], row["check_profile"] = _profiled(lambda: run_correctness(payload))
    measure = {"problem": problem.to_dict(), "editable": child, "target": target,
               "parent_editable": problem.editable}
    row["measure_inprocess_s"], row["measure_profile"] = _profiled(
        lambda: measure_candidate_task(measure))
    case = measure_candidate_task(measure)["ncu_case"]
    row["ncu_passes"] = ncu_passes(problem, child, case) if case else []
    return row


def ncu_passes(problem: Any, child: str, case: dict[str, Any]) -> list[dict[str, Any]]:
    """The Nsight Compute pass alone, sandboxed: three warm runs (the first also starts the
    ncu-launched zygote) and two fresh ones, each with its wall time and the h it read."""
    from kernelband.profile.ncu import NcuOutcome, signature
    from kernelband.profile.ncu_pass import NCU_TIMEOUT_S
    from kernelband.profile.sandboxed import NCU_TARGET
    from kernelband.sandbox import SandboxLimits, run_sandboxed

    payload = {"problem": problem.to_dict(), "editable": child, "case": case,
               "timeout_s": NCU_TIMEOUT_S}
    rows = []
    for warm in (True, True, True, False, False):
        limits = SandboxLimits.from_settings(profiled=True, audit=False, warm=warm,
                                             wall_s=NCU_TIMEOUT_S + 30.0)
        result, wall = _timed(lambda limits=limits: run_sandboxed(NCU_TARGET, payload, limits))
        value = result.value if result.ok and isinstance(result.value, dict) else {}
        outcome = NcuOutcome.from_dict(value["outcome"]) if value else None
        rows.append({"asked_warm": warm, "mode": value.get("mode"), "wall_s": wall,
                     "pass_s": value.get("seconds"), "ok": bool(outcome and outcome.ok),
                     "h": signature(outcome) if outcome else None,
                     "reason": outcome.reason if outcome else result.reason,
                     "message": (outcome.message if outcome else result.message)[-400:]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="softmax,matmul")
    parser.add_argument("--target", default="h100")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb-step-profile"))
    parser.add_argument("--path-file", action="store_true",
                        help="write a .pth so sandbox children import this checkout (bare GPU machine)")
    args = parser.parse_args(argv)
    if args.path_file:
        install_path_file([str(Path.cwd()), *[p for p in sys.path if p.startswith("/tmp/site")]])
    args.out.mkdir(parents=True, exist_ok=True)
    paths = [ROOT / "examples" / f"{name}.py" for name in args.only.split(",")]
    scaled = [p for p, _ in write_scaled_examples(paths, args.work)]
    data: dict[str, Any] = {"child_start": child_start_s(), "examples": []}
    print(json.dumps(data["child_start"]), flush=True)
    for path in scaled:
        row = profile_example(path, args.target)
        data["examples"].append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_profile")}), flush=True)
        for kind in ("check", "measure"):
            print(f"--- {row['example']} {kind} in-process", flush=True)
            print(_head(row[f"{kind}_profile"]), flush=True)
    (args.out / "step_profile.json").write_text(json.dumps(data, indent=1))


def install_path_file(paths: list[str]) -> Path | None:
    """Write a .pth file so sandbox children (started with a scrubbed environment) find `paths`."""
    for directory in site.getsitepackages():
        target = Path(directory) / "kernelband_gpu_validate.pth"
        try:
            target.write_text("\n".join(paths) + "\n")
        except OSError:
            continue
        return target
    return None


def _head(text: str, lines: int = 22) -> str:
    body = [line.rstrip() for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(body) if "ncalls" in line), 0)
    return "\n".join(body[start:start + lines])


if __name__ == "__main__":
    main()
