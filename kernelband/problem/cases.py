"""Validate the case lists and options a problem module declares."""

from __future__ import annotations

import json
from typing import Any

from kernelband.problem.model import DEFAULT_TOLERANCES, Case, ProblemLoadError

KNOWN_DTYPES = tuple(DEFAULT_TOLERANCES)
_CASE_KEYS = {"name", "params", "dtype"}


def _case(raw: Any, where: str, held_out: bool) -> Case:
    if not isinstance(raw, dict):
        raise ProblemLoadError(f"{where} must be a dict with name, params and dtype, got {raw!r}")
    unknown = set(raw) - _CASE_KEYS
    if unknown:
        raise ProblemLoadError(
            f"{where} has unknown keys {sorted(unknown)}; use name, params, dtype"
        )
    name, params, dtype = raw.get("name"), raw.get("params", {}), raw.get("dtype", "float32")
    if not isinstance(name, str) or not name:
        raise ProblemLoadError(f"{where} needs a non-empty string 'name'")
    if not isinstance(params, dict):
        raise ProblemLoadError(f"{where} ({name}): 'params' must be a dict of sizes/options")
    if dtype not in KNOWN_DTYPES:
        raise ProblemLoadError(f"{where} ({name}): dtype {dtype!r} is not one of {KNOWN_DTYPES}")
    try:
        json.dumps(params)
    except TypeError as exc:
        raise ProblemLoadError(
            f"{where} ({name}): params must be plain JSON values (numbers, strings, lists): {exc}"
        ) from exc
    return Case(name=name, params=dict(params), dtype=dtype, held_out=held_out)


def parse_cases(raw: Any, label: str, held_out: bool) -> tuple[Case, ...]:
    """`raw` (a list of dicts) as Cases; `label` names the list in errors."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ProblemLoadError(f"{label} must be a list of dicts (name, params, dtype)")
    return tuple(_case(item, f"{label}[{i}]", held_out) for i, item in enumerate(raw))


def check_unique(cases: tuple[Case, ...]) -> None:
    """Case names must be unique over public and held-out cases."""
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ProblemLoadError(
                f"case name {case.name!r} is used twice; give each case its own name"
            )
        seen.add(case.name)


def parse_tolerances(raw: Any) -> dict[str, tuple[float, float]]:
    """TOLERANCES = {"float16": (atol, rtol)} validated."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ProblemLoadError('TOLERANCES must be a dict like {"float16": (atol, rtol)}')
    out: dict[str, tuple[float, float]] = {}
    for dtype, pair in raw.items():
        ok = isinstance(pair, list | tuple) and len(pair) == 2
        if dtype not in KNOWN_DTYPES or not ok or not all(isinstance(v, int | float) for v in pair):
            raise ProblemLoadError(
                f"TOLERANCES[{dtype!r}] must be (atol, rtol) for a dtype in {KNOWN_DTYPES}"
            )
        out[dtype] = (float(pair[0]), float(pair[1]))
    return out


def parse_inplace(raw: Any) -> tuple[int, ...]:
    """INPLACE_OUTPUTS = (argument indices) validated."""
    if raw is None:
        return ()
    if isinstance(raw, int):
        raw = (raw,)
    if not isinstance(raw, list | tuple) or not all(isinstance(i, int) and i >= 0 for i in raw):
        raise ProblemLoadError("INPLACE_OUTPUTS must be a tuple of argument indices, e.g. (2,)")
    return tuple(raw)
