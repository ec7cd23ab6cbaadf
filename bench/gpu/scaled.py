"""Scaled copies of the examples for the GPU optimize step: same kernels, larger cases.

At the examples' own sizes a launch runs 4-8 µs and launch overhead swamps any speedup, so the
scaled mode rewrites only the CASES / HELD_OUT_CASES literals of a copy under a scratch folder
(examples/ is never touched). Held-out shapes differ from the public ones and include odd sizes.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

# (public, held-out) shapes per parameter family; every public list mixes a power of two and a
# non-power of two, and the held-out shapes are odd-sized so no generator sees them.
SHAPES: dict[str, tuple[list[dict[str, int]], list[dict[str, int]]]] = {
    "n": ([{"n": 1 << 24}, {"n": 10_000_003}], [{"n": 12_345_679}, {"n": 3_000_001}]),
    "rows_cols": ([{"rows": 4096, "cols": 4096}, {"rows": 2048, "cols": 6000}],
                  [{"rows": 3000, "cols": 5001}, {"rows": 1025, "cols": 8191}]),
    "mnk": ([{"m": 1024, "n": 1024, "k": 1024}, {"m": 1536, "n": 1000, "k": 768}],
            [{"m": 1000, "n": 1100, "k": 900}, {"m": 513, "n": 777, "k": 1031}]),
}


def shape_family(params: dict[str, Any]) -> str | None:
    """Which SHAPES entry fits a case's parameter names (None: no safe way to grow it)."""
    keys = set(params)
    if keys == {"n"}:
        return "n"
    if {"m", "n", "k"} <= keys:
        return "mnk"
    if {"rows", "cols"} <= keys:
        return "rows_cols"
    return None


def _name(params: dict[str, int], dtype: str) -> str:
    short = "_".join(f"{k[0]}{v}" for k, v in params.items())
    return short + ("" if dtype == "float32" else f"_{dtype.replace('float', 'fp')}")


def _cases(shapes: list[dict[str, int]], dtypes: list[str]) -> list[dict[str, Any]]:
    return [{"name": _name(s, d), "params": dict(s), "dtype": d} for s, d in zip(shapes, dtypes, strict=True)]


def scaled_cases(cases: list[dict[str, Any]],
                 held_out: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(public, held-out) scaled case dicts: the first and last original dtypes are kept."""
    if not cases:
        raise ValueError("the example declares no CASES; add at least one case to scale")
    family = shape_family(cases[0]["params"])
    if family is None:
        raise ValueError(f"cannot scale cases with parameters {sorted(cases[0]['params'])}; "
                         "only n, rows/cols and m/n/k problems have scaled shapes")
    public, hidden = SHAPES[family]
    first, last = cases[0].get("dtype", "float32"), cases[-1].get("dtype", "float32")
    held_first = (held_out or cases)[0].get("dtype", "float32")
    return _cases(public, [first, last]), _cases(hidden, [held_first, last])


def _assignment_span(tree: ast.Module, name: str) -> tuple[int, int]:
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            return node.lineno, node.end_lineno or node.lineno
    raise ValueError(f"no top-level `{name} = [...]` in the example; scaled mode needs one")


def scaled_source(source: str) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """The example's text with its case lists replaced by scaled ones, and those lists."""
    tree = ast.parse(source)
    lines = source.splitlines()
    spans = {n: _assignment_span(tree, n) for n in ("CASES", "HELD_OUT_CASES")}
    originals = {n: ast.literal_eval("\n".join(lines[a - 1:b]).split("=", 1)[1])
                 for n, (a, b) in spans.items()}
    public, held = scaled_cases(originals["CASES"], originals["HELD_OUT_CASES"])
    replacement = {"CASES": public, "HELD_OUT_CASES": held}
    # Replace the later assignment first so the earlier span's line numbers stay valid.
    for name, (start, end) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
        lines[start - 1:end] = [f"{name} = {replacement[name]!r}"]
    return "\n".join(lines) + "\n", public, held


def write_scaled_examples(paths: list[Path], folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Scaled copies of `paths` under `folder` (same file names), each with its case lists."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for path in paths:
        text, public, held = scaled_source(path.read_text())
        target = folder / path.name
        target.write_text(text)
        out.append((target, {"public": public, "held_out": held}))
    return out
