"""The kernel problem a team submits: plain data, safe to pass between processes.

Nothing here imports or executes the user's code; the loaders that do so run in the sandbox
and return a `KernelProblem` built from plain values.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kernelband.problem.editable import splice_region
from kernelband.problem.errors import ProblemLoadError as ProblemLoadError

ProblemFormat = Literal["native", "tritonbench", "kernelbench"]
PROBLEM_FORMATS: tuple[str, ...] = ("native", "tritonbench", "kernelbench")

# Default tolerances (atol, rtol) per dtype name; a problem may override them.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-6, 1e-6),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}


def problem_hash(source: str, format: str, perf_source: str = "") -> str:
    """A problem's identity: its format and text, and its performance harness if any."""
    perf = f"\n# kernelband: perf harness\n{perf_source}" if perf_source else ""
    return hashlib.sha256(f"{format}\n{source}{perf}".encode()).hexdigest()


@dataclass(frozen=True)
class Case:
    """One input configuration: a name, its parameters (sizes, shapes) and dtype."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    held_out: bool = False


class CaseInputs(list[Any]):
    """The argument list of one call; it remembers the case and seed it was built for."""

    def __init__(self, args: list[Any], case: Case, seed: int) -> None:
        super().__init__(args)
        self.case = case
        self.seed = seed


@dataclass(frozen=True)
class KernelProblem:
    """A loaded problem. `source` is the complete module text in its own format.

    `editable` is the region a generator may rewrite (the Triton kernels and the entry
    function); `splice(new_region)` returns the full module with that region replaced.
    """

    name: str
    format: ProblemFormat
    source: str
    editable: str
    entry: str
    kernel_names: tuple[str, ...]
    cases: tuple[Case, ...]
    held_out_cases: tuple[Case, ...]
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    inplace_outputs: tuple[int, ...] = ()
    allow_nondeterminism: bool = False
    description: str = ""
    # case -> how far the original differs from itself on identical inputs (None: shapes, NaN
    # or Inf positions differ); empty when it agrees with itself (kernelband/problem/selfcheck.py)
    self_spread: dict[str, float | None] = field(default_factory=dict)
    # a TritonBench-G performance harness (NAME_perf.py text): the timed inputs and call_op
    perf_source: str = ""
    # a KernelBench file as published: no Triton yet; the region is a placeholder ModelNew that
    # is the PyTorch Model itself, and each track's first pull translates it (problem/translate.py)
    needs_translation: bool = False

    @property
    def content_hash(self) -> str:
        return problem_hash(self.source, self.format, self.perf_source)

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype in self.tolerances:
            return self.tolerances[dtype]
        return DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"])

    def splice(self, editable: str) -> str:
        """The full module text with the editable region replaced by `editable`."""
        return splice_region(self.source, self.format, editable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelProblem:
        fields = dict(data)
        fields["cases"] = tuple(Case(**c) for c in data["cases"])
        fields["held_out_cases"] = tuple(Case(**c) for c in data["held_out_cases"])
        fields["kernel_names"] = tuple(data["kernel_names"])
        fields["inplace_outputs"] = tuple(data.get("inplace_outputs", ()))
        fields["tolerances"] = {k: tuple(v) for k, v in data.get("tolerances", {}).items()}
        fields["self_spread"] = dict(data.get("self_spread") or {})
        return cls(**fields)
