"""Helpers shared by the problem tests (imported by module name; pytest puts this folder first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def results_close(out: Any, ref: Any, tol: tuple[float, float]) -> bool:
    """Tensors (possibly nested in lists/tuples/dicts) equal within (atol, rtol)."""
    import torch

    if isinstance(ref, dict):
        return set(out) == set(ref) and all(results_close(out[k], ref[k], tol) for k in ref)
    if isinstance(ref, list | tuple):
        return len(out) == len(ref) and all(
            results_close(o, r, tol) for o, r in zip(out, ref, strict=True)
        )
    if isinstance(ref, torch.Tensor):
        return (
            isinstance(out, torch.Tensor)
            and out.shape == ref.shape
            and torch.allclose(out.float(), ref.float(), atol=tol[0], rtol=tol[1])
        )
    return bool(out == ref)
