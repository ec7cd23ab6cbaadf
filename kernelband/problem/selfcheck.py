"""The original against itself: run several times in the fair harness, does it agree with itself?

A kernel that uses atomics, or a test with a data race, can give different results on identical
inputs. Comparing such an original with a candidate bit for bit would refuse every candidate,
the original included. `measure_spread` finds how far runs differ per case (Python floats, a
test's `.item()` values, included);
`derived_tolerances` turns that into the tolerance candidates are compared within.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelband.problem.model import DEFAULT_TOLERANCES

# Candidates may differ from the reference by this many times the original's own spread.
SPREAD_FACTOR = 2.0
# Runs of the original on identical inputs at load (the first gives the cases): a kernel whose
# result depends on a race or on memory it never wrote may agree with itself in two runs.
SELF_RUNS = 3


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a result, Python floats (a test's `.item()` values) as float64 tensors."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, float):
        return [torch.tensor(value, dtype=torch.float64)]
    if type(value).__module__ == "numpy" and hasattr(value, "shape"):
        return [torch.as_tensor(value)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _pair_spread(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape or a.dtype != b.dtype:
        return math.inf
    x, y = a.detach().double().cpu(), b.detach().to(a.device).double().cpu()
    same_nan = torch.isnan(x) == torch.isnan(y)
    if not bool(same_nan.all()):
        return math.inf
    finite = torch.isfinite(x) & torch.isfinite(y)
    if not bool(torch.equal(x[~finite].nan_to_num(), y[~finite].nan_to_num())):
        return math.inf
    return float((x[finite] - y[finite]).abs().max()) if bool(finite.any()) else 0.0


def spread(first: Any, second: Any) -> float:
    """The largest absolute difference between two results (inf: shapes, NaNs or Infs differ)."""
    ta, tb = _tensors(first), _tensors(second)
    if len(ta) != len(tb):
        return math.inf
    if not ta:
        try:
            return 0.0 if bool(first == second) else math.inf
        except (TypeError, ValueError):  # values without a truth value for ==
            return 0.0 if repr(first) == repr(second) else math.inf
    return max(_pair_spread(a, b) for a, b in zip(ta, tb, strict=True))


def measure_spread(first: dict[str, Any], *others: dict[str, Any]) -> dict[str, float]:
    """Per case, how far runs on identical inputs differ from the first (the largest
    difference over `others`); only the cases that differ."""
    found = {name: max(spread(first[name], other.get(name)) for other in others) for name in first}
    return {name: value for name, value in found.items() if value > 0}


def spread_by_dtype(first: dict[str, Any], *others: dict[str, Any]) -> dict[str, float]:
    """Per dtype, the largest finite difference between runs over every case's tensors: a
    case's result may mix dtypes (int8 values and their float scales), each needs its own
    tolerance."""
    out: dict[str, float] = {}
    for name, value in first.items():
        for other in others:
            ta, tb = _tensors(value), _tensors(other.get(name))
            if len(ta) != len(tb):
                continue
            for a, b in zip(ta, tb, strict=True):
                found = _pair_spread(a, b)
                if 0 < found < math.inf:
                    dtype = str(a.dtype).removeprefix("torch.")
                    out[dtype] = max(out.get(dtype, 0.0), found)
    return out


def derived_tolerances(
    spreads: dict[str, float], dtypes: dict[str, str], declared: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """(atol, rtol) per dtype wide enough for the measured spread; declared ones win."""
    out: dict[str, tuple[float, float]] = {}
    for name, value in spreads.items():
        dtype = dtypes[name]
        if dtype in declared or not math.isfinite(value):
            continue
        atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))
        wanted = max(atol, SPREAD_FACTOR * value)
        out[dtype] = (max(wanted, out.get(dtype, (0.0, 0.0))[0]), rtol)
    return out


def describe(spreads: dict[str, float], tolerances: dict[str, tuple[float, float]]) -> str:
    """One sentence for the problem's description (the job page and the API show it)."""
    cases = ", ".join(f"{name} by {value:.3g}" for name, value in sorted(spreads.items()))
    tol = ", ".join(f"{d} atol {a:.3g}" for d, (a, _) in sorted(tolerances.items()))
    within = f"; candidates are compared within {tol} (set TOLERANCES to override)" if tol else ""
    return (f" Nondeterministic: the original disagrees with itself on identical inputs ({cases})"
            f"{within}.")
