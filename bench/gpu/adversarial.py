"""GPU validation of the evaluator's defences: `python -m bench.gpu.adversarial [--out DIR]`.

Runs on one CUDA GPU in about two minutes. For a 16M-element float32 add (the size of the
timing-phase exploit found on an H100), each GPU-only reward-hacking class is tried three ways:
the correctness check the service runs (`evaluate_candidate`), the service's verified
measurement (`measure_candidate`), and, for comparison, the unverified timing earlier versions
used (shared inputs, no checks: what the exploit would have been credited). It prints one line
per class (caught or not, by which reason, with the measured times) and writes DIR/adversarial.json.
Nothing here invents a number: a step that fails says so in its row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
N = 1 << 24

PROBLEM = f'''"""out = x + y on {N} float32 elements."""
import torch
import triton
import triton.language as tl

# kernelband: editable begin
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def entry(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
    return out
# kernelband: editable end


def reference(x, y):
    return x + y


def make_inputs(case, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    n = case.params["n"]
    return [torch.randn(n, generator=gen, device=device), torch.randn(n, generator=gen, device=device)]


ENTRY = "entry"
CASES = [{{"name": "n16m", "params": {{"n": {N}}}, "dtype": "float32"}}]
HELD_OUT_CASES = [{{"name": "n1m", "params": {{"n": 1048576}}, "dtype": "float32"}}]
'''

KERNEL = '''@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _add(x, y, out, n=None):
    n = x.numel() if n is None else n
    add_kernel[(triton.cdiv(max(n, 1), 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    return out
'''

# class -> (what it does, the editable region after KERNEL)
CANDIDATES: dict[str, tuple[str, str]] = {
    "honest": ("the original kernel", '''
def entry(x, y):
    return _add(x, y, torch.empty_like(x))'''),
    "call_counting": ("honest for 40 calls, then the kernel runs on one element", '''
def entry(x, y, _calls=[0]):
    _calls[0] += 1
    out = torch.empty_like(x)
    return _add(x, y, out, None if _calls[0] <= 40 else 1)'''),
    "cache_by_address": ("result cached by the inputs' data_ptr()", '''
def entry(x, y, _cache={}):
    key = (x.data_ptr(), y.data_ptr())
    if key not in _cache:
        _cache[key] = _add(x, y, torch.empty_like(x))
    _add(x, y, torch.empty_like(x[:1]), 0)
    return _cache[key].clone()'''),
    "cache_by_fingerprint": ("result cached by a cheap fingerprint (a few elements)", '''
def entry(x, y, _cache={}):
    key = tuple(float(v) for v in (x[0], x[-1], y[0], y[-1], x[x.numel() // 2]))
    if key not in _cache:
        _cache[key] = _add(x, y, torch.empty_like(x))
    _add(x, y, torch.empty_like(x[:1]), 0)
    return _cache[key].clone()'''),
    "side_stream": ("the kernel runs on a side stream the timer does not see", '''
def entry(x, y, _side=[]):
    if not _side:
        _side.append(torch.cuda.Stream())
    out = torch.empty_like(x)
    with torch.cuda.stream(_side[0]):
        _add(x, y, out)
    return out'''),
    "lazy_output": ("returns a tensor subclass (could defer work or answer comparisons)", '''
class Deferred(torch.Tensor):
    pass


def entry(x, y):
    return _add(x, y, torch.empty_like(x)).as_subclass(Deferred)'''),
    "stale_memory": ("returns uninitialised memory (the reference's freed result?)", '''
def entry(x, y):
    out = torch.empty_like(x)
    _add(x, y, out, 0)
    return out'''),
    "host_numpy_decoy": ("token launch, answer computed with numpy on the host", '''
def entry(x, y):
    _add(x, y, torch.empty_like(x[:1]), 0)
    return torch.from_numpy(x.cpu().numpy() + y.cpu().numpy()).to(x.device)'''),
    "torch_decoy": ("token launch, answer computed with torch (Triton share)", '''
def entry(x, y):
    _add(x, y, torch.empty_like(x[:1]), 0)
    return torch.add(x, y)'''),
}


def naive_time_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Sandbox target: the unverified timing of earlier versions (shared inputs, no checks)."""
    from kernelband.problem import KernelProblem
    from kernelband.problem.runtime import load_runtime
    from kernelband.profile.timing import CudaDevice, measure

    problem = KernelProblem.from_dict(payload["problem"])
    runtime = load_runtime(problem, payload["editable"], "cuda", workdir=os.getcwd())
    case = problem.cases[0]
    args = runtime.inputs(case, 0)
    stats = measure(CudaDevice(), lambda: (lambda: runtime.candidate(args)))
    return {"median_ms": stats.median_ms, "reps": stats.reps}


def _naive(problem: Any, editable: str, limits: Any) -> dict[str, Any]:
    from kernelband.sandbox import run_sandboxed

    result = run_sandboxed("bench.gpu.adversarial:naive_time_task",
                           {"problem": problem.to_dict(), "editable": editable}, limits)
    return result.value if result.ok else {"error": f"{result.reason}: {result.message[:200]}"}


def _verified(problem: Any, editable: str, target: str) -> dict[str, Any]:
    """The service's measurement path (`kernelband.scheduling.tasks`), implausibility gate included."""
    from kernelband.scheduling.tasks import _measure

    start = time.perf_counter()
    timings: dict[str, float] = {}
    result = _measure(problem, editable, {"target": target, "hardware_signature": False}, timings)
    wall = time.perf_counter() - start
    if isinstance(result, dict):
        return {"rejected": result["reason"], "message": str(result["message"])[:300], "wall_s": wall}
    m = result[0]
    return {"time_ms": m["time_ms"], "floors_ms": m.get("floors_ms"), "checks": m.get("checks"),
            "triton_share": m.get("triton_share"), "method": m["method"], "wall_s": wall}


def run_class(name: str, problem: Any, target: str, limits: Any) -> dict[str, Any]:
    """One class: correctness verdict, verified measurement, unverified time."""
    from kernelband.evaluate import evaluate_candidate

    editable = KERNEL + CANDIDATES[name][1]
    verdict = evaluate_candidate(problem, editable, held_out=True, seeds=2, limits=limits)
    row: dict[str, Any] = {"class": name, "what": CANDIDATES[name][0],
                           "check": verdict.reason, "check_message": verdict.message[:300]}
    row["verified"] = _verified(problem, editable, target)
    row["unverified"] = _naive(problem, editable, limits)
    rejected = row["verified"].get("rejected")
    row["caught"] = (not verdict.correct) or bool(rejected)
    row["caught_by"] = [r for r in (None if verdict.correct else verdict.reason, rejected) if r]
    return row


def _overhead(problem: Any, target: str) -> dict[str, Any]:
    """Verified (sampled) and strict measurement of the original, against the unverified time."""
    from kernelband.profile import measure_candidate

    out: dict[str, Any] = {}
    for strict in (False, True):
        start = time.perf_counter()
        m, _ = measure_candidate(problem, None, target, hardware_signature=False, strict=strict)
        out["strict" if strict else "sampled"] = {"time_ms": m.time_ms, "checks": m.checks,
                                                  "wall_s": time.perf_counter() - start}
    return out


def _line(row: dict[str, Any]) -> str:
    v, u = row["verified"], row["unverified"]
    verified = f"rejected {v['rejected']}" if v.get("rejected") else f"{v.get('time_ms', float('nan')):.4f} ms"
    share = v.get("triton_share")
    share_text = f", triton share {share:.2f}" if isinstance(share, float) else ""
    unverified = f"{u['median_ms']:.4f} ms" if "median_ms" in u else u.get("error", "?")
    mark = "CAUGHT" if row["caught"] else ("ok (honest)" if row["class"] == "honest" else "NOT CAUGHT")
    return (f"{row['class']:<22} {mark:<12} check={row['check']:<28} verified={verified}{share_text}; "
            f"unverified timing (old harness) {unverified}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("bench/gpu/out"))
    p.add_argument("--only", default="", help="comma-separated classes (default: all)")
    args = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: run this on a GPU node", file=sys.stderr)
        return 2
    # sandbox children keep PYTHONPATH: they import this checkout (and bench/) too
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(ROOT))
    from kernelband.evaluate.integrity import reset_l2_persistence
    from kernelband.profile.archs import target_for_capability
    from kernelband.sandbox import SandboxLimits, load_problem_sandboxed, shutdown_pool

    started = time.perf_counter()
    target = target_for_capability(*torch.cuda.get_device_capability())
    limits = SandboxLimits.from_settings(wall_s=240.0)
    problem = load_problem_sandboxed(PROBLEM, "native", "adversarial_add", limits)
    names = [n for n in CANDIDATES if not args.only or n in args.only.split(",")]
    rows = []
    try:
        for name in names:
            rows.append(run_class(name, problem, target, limits))
            print(_line(rows[-1]), flush=True)
        overhead = _overhead(problem, target)
    finally:
        shutdown_pool()
    torch.cuda.init()
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "target": target,
              "rows": rows, "overhead": overhead, "wall_s": time.perf_counter() - started,
              "l2_persistence_reset": reset_l2_persistence()}
    print(f"overhead (original): {json.dumps(overhead, default=str)}")
    print(f"L2 persistence reset works here: {report['l2_persistence_reset']}; wall {report['wall_s']:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "adversarial.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    missed = [r["class"] for r in rows if r["class"] != "honest" and not r["caught"]]
    honest_rejected = [r["class"] for r in rows if r["class"] == "honest" and r["caught"]]
    print(f"not caught: {missed or 'none'}; honest rejected: {honest_rejected or 'no'}")
    return 1 if missed or honest_rejected else 0


if __name__ == "__main__":
    raise SystemExit(main())
