"""Compare results and arguments: tolerances, NaN/Inf positions, shapes, dtypes, aliasing."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

Tolerance = Callable[[str], tuple[float, float]]


@dataclass(frozen=True)
class Mismatch:
    """The first difference found: a reason and what it was, for the message."""

    reason: str
    where: str
    detail: str
    max_abs_err: float | None = None


def dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _compare_tensors(exp: torch.Tensor, act: Any, tol: Tolerance, where: str) -> Mismatch | None:
    if not isinstance(act, torch.Tensor):
        return Mismatch("wrong_type", where, f"expected a tensor, got {type(act).__name__}")
    if tuple(act.shape) != tuple(exp.shape):
        return Mismatch("wrong_shape", where, f"shape {tuple(act.shape)} != expected {tuple(exp.shape)}")
    if act.dtype != exp.dtype:
        return Mismatch("wrong_dtype", where, f"dtype {dtype_name(act)} != expected {dtype_name(exp)}")
    # Compared where the reference lives (a GPU: no copy of both tensors to the host); float64
    # subtraction and comparison give the same answer on every device.
    act = act.detach().to(exp.device)
    if not (exp.is_floating_point() or exp.is_complex()):
        if torch.equal(act, exp):
            return None
        # exact unless the problem measured its original's own spread (selfcheck.py)
        atol = tol(dtype_name(exp))[0] if exp.dtype != torch.bool else 0.0
        err = float((act.long() - exp.long()).abs().max()) if exp.numel() else 0.0
        if atol >= 1 and err <= atol:
            return None
        return Mismatch("wrong_result", where, "integer/bool values differ (exact match required)", err)
    e, a = exp.detach().double(), act.double()
    if not torch.equal(torch.isnan(e), torch.isnan(a)):
        return Mismatch("nan_mismatch", where, "NaN positions differ from the reference")
    e_inf, a_inf = torch.isinf(e), torch.isinf(a)
    if not torch.equal(e_inf, a_inf) or not torch.equal(e[e_inf], a[a_inf]):
        return Mismatch("inf_mismatch", where, "Inf positions or signs differ from the reference")
    finite = torch.isfinite(e)
    if not bool(finite.any()):
        return None
    atol, rtol = tol(dtype_name(exp))
    err = (a[finite] - e[finite]).abs()
    bad = err > atol + rtol * e[finite].abs()
    if bool(bad.any()):
        max_err = float(err.max())
        return Mismatch("wrong_result", where, f"max_abs_err {max_err:.3g} > atol {atol:g} "
                        f"(rtol {rtol:g}; {int(bad.sum())} elements off)", max_err)
    return None


def _numpy_as_tensor(value: Any) -> Any:
    """numpy arrays and scalars are compared as tensors (== on them has no single truth value)."""
    if type(value).__module__ == "numpy" and hasattr(value, "shape"):
        return torch.as_tensor(value)
    return value


def compare_results(expected: Any, actual: Any, tol: Tolerance, where: str = "output") -> Mismatch | None:
    """The first mismatch between the reference's and the candidate's result, or None."""
    expected, actual = _numpy_as_tensor(expected), _numpy_as_tensor(actual)
    if isinstance(expected, torch.Tensor):
        return _compare_tensors(expected, actual, tol, where)
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return Mismatch("wrong_type", where, f"expected a sequence of {len(expected)}, got {type(actual).__name__}")
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = compare_results(e, a, tol, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return Mismatch("wrong_type", where, "dict keys differ from the reference")
        for key in expected:
            found = compare_results(expected[key], actual[key], tol, f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, float) and isinstance(actual, int | float):
        atol, rtol = tol("float64")
        if not (math.isfinite(actual) and math.isfinite(expected)):
            # an infinity or NaN matches only itself (a tolerance around inf is inf)
            if actual == expected or (math.isnan(actual) and math.isnan(expected)):
                return None
        elif abs(actual - expected) <= atol + rtol * abs(expected):
            return None
        return Mismatch("wrong_result", where, f"{actual!r} != expected {expected!r}", abs(actual - expected))
    if expected != actual or type(expected) is not type(actual):
        return Mismatch("wrong_result", where, f"{actual!r} != expected {expected!r}")
    return None


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside a result or argument list."""
    value = _numpy_as_tensor(value)
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)


def bitwise_equal(a: Any, b: Any) -> bool:
    """Identical bits (NaN == NaN) for tensor trees; == for anything else."""
    ta, tb = list(tensors(a)), list(tensors(b))
    if len(ta) != len(tb) or (not ta and a != b):
        return False
    for x, y in zip(ta, tb, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        xb = x.detach().contiguous().reshape(-1).view(torch.uint8)
        yb = y.detach().to(x.device).contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(xb, yb):
            return False
    return True


def snapshot(args: list[Any]) -> list[Any]:
    """Clones of the tensor arguments (other values as they are)."""
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


def mutated_indices(before: list[Any], after: list[Any], allowed: tuple[int, ...]) -> list[int]:
    """Indices of tensor arguments the call changed, except the declared in-place outputs."""
    return [i for i, (b, a) in enumerate(zip(before, after, strict=True))
            if isinstance(b, torch.Tensor) and i not in allowed and not bitwise_equal(b, a)]


def aliased_indices(result: Any, args: list[Any], allowed: tuple[int, ...]) -> list[int]:
    """Indices of input arguments whose memory a result tensor shares (views included)."""
    ptrs = {t.untyped_storage().data_ptr() for t in tensors(result) if t.numel() > 0}
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in allowed
            and a.numel() > 0 and a.untyped_storage().data_ptr() in ptrs]
