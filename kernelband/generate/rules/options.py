"""Candidate rewrites per strategy: each option is a described, deterministic edit of a region."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from kernelband.generate.rules import transforms as t
from kernelband.generate.rules.analysis import Region
from kernelband.generate.rules.knobs import Knob, find_knobs

Edit = Callable[[cst.Module], cst.Module]


@dataclass(frozen=True)
class Option:
    """One rewrite: what it does (in words) and the edit itself."""

    description: str
    edit: Edit


def _launch_keyword(kernel: str, name: str, value: int) -> Edit:
    return lambda mod: t.edit_launches(mod, {kernel}, lambda call, grid: t.set_keyword(call, name, str(value)))


def _knob_edit(knob: Knob, value: int) -> Edit:
    if knob.kind == "constant":
        return lambda mod: t.replace_int_assignment(mod, knob.name, value)
    if knob.kind == "default":
        return lambda mod: t.edit_kernel(mod, knob.kernel, lambda f: t.set_default(f, knob.name, value))

    def launch_literal(call: cst.Call, grid: cst.BaseExpression) -> cst.Call:
        call = t.set_keyword(call, knob.name, str(value))
        return call

    def edit(mod: cst.Module) -> cst.Module:
        mod = t.edit_launches(mod, {knob.kernel}, launch_literal)
        # the grid (inline or in a variable) divides by the same literal: keep them in step
        return t.replace_cdiv_divisor_everywhere(mod, knob.current, value) if knob.grid_literal else mod

    return edit


def tiling(region: Region, code: str, inplace: bool) -> list[Option]:
    """Change one tile size to another power of two (grids follow it through cdiv)."""
    return [
        Option(f"tiling: {knob.name} of {knob.kernel} {knob.current} -> {value}", _knob_edit(knob, value))
        for knob in find_knobs(region, code)
        for value in knob.values(region.kernels[knob.kernel])
    ]


def _tunable(region: Region) -> list[str]:
    return [k for k, info in region.kernels.items() if region.launches_of(k) and not info.autotuned]


def _tl_range(kernel: str, stages: int) -> Edit:
    return lambda mod: t.edit_kernel(mod, kernel, lambda f: t.range_to_tl_range(f, stages))


def pipeline(region: Region, code: str, inplace: bool) -> list[Option]:
    """num_stages at launches, or software-pipelined tl.range loops."""
    options: list[Option] = []
    for kernel in _tunable(region):
        current = {launch.keywords.get("num_stages") for launch in region.launches_of(kernel)}
        options += [Option(f"pipeline: num_stages={s} at launches of {kernel}", _launch_keyword(kernel, "num_stages", s))
                    for s in (1, 2, 3, 4) if {str(s)} != current]
    for kernel in region.kernels:
        for stages in (2, 3):
            options.append(Option(
                f"pipeline: loops of {kernel} as tl.range(num_stages={stages})", _tl_range(kernel, stages)
            ))
    return options


_AUTOTUNE = (
    "triton.autotune(configs=[triton.Config({}, num_warps=w, num_stages=s) "
    "for w, s in ((2, 2), (4, 2), (4, 3), (8, 3))], key=[])"
)


def _autotune(kernel: str) -> Edit:
    def edit(mod: cst.Module) -> cst.Module:
        mod = t.edit_kernel(mod, kernel, lambda f: t.add_decorator(f, _AUTOTUNE))
        # the tuner supplies num_warps/num_stages; passing them as well is an error
        return t.edit_launches(mod, {kernel}, lambda call, grid: t.drop_keywords(call, {"num_warps", "num_stages"}))
    return edit


def _swap_grid(kernel: str) -> Edit:
    def edit(mod: cst.Module) -> cst.Module:
        mod = t.edit_kernel(mod, kernel, t.swap_program_axes)
        return t.edit_launches(mod, {kernel}, lambda call, grid: t.replace_grid(call, t.swapped_grid(grid) or grid))
    return edit


def reordering(region: Region, code: str, inplace: bool, gpu_only: bool = False) -> list[Option]:
    """num_warps, a swapped 2-D tile order, or (`gpu_only`) an autotuned launch configuration."""
    options: list[Option] = []
    for kernel in _tunable(region):
        launches = region.launches_of(kernel)
        current = {launch.keywords.get("num_warps") for launch in launches}
        options += [Option(f"reordering: num_warps={w} at launches of {kernel}", _launch_keyword(kernel, "num_warps", w))
                    for w in (1, 2, 4, 8, 16) if {str(w)} != current]
        # autotuning benchmarks on a GPU (the CPU interpreter has no driver for it) and re-runs
        # the kernel, which would corrupt in-place outputs
        if gpu_only and not inplace:
            options.append(Option(f"reordering: autotune num_warps/num_stages of {kernel}", _autotune(kernel)))
        info = region.kernels[kernel]
        two_d = all(launch.grid_code.startswith("(") and launch.grid_code.count(",") == 1 for launch in launches)
        if info.uses_dot and len(launches) == 1 and two_d:
            options.append(Option(f"reordering: swap the 2-D program order of {kernel}", _swap_grid(kernel)))
    return options


def _hints(kernel: str) -> Edit:
    return lambda mod: t.edit_kernel(mod, kernel, t.add_contiguity_hints)


def _then(first: Edit, second: Edit) -> Edit:
    return lambda mod: second(first(mod))


def vectorization(region: Region, code: str, inplace: bool) -> list[Option]:
    """Alignment/contiguity hints on block offsets, alone or with a wider block."""
    options: list[Option] = []
    for kernel in region.kernels:
        if "multiple_of" in code:
            continue
        hints = _hints(kernel)
        options.append(Option(f"vectorization: contiguity hints on offsets of {kernel}", hints))
        for knob in find_knobs(region, code):
            wider = [v for v in knob.values(region.kernels[knob.kernel]) if v > knob.current][:2]
            options += [Option(
                f"vectorization: hints on {kernel} and {knob.name} {knob.current} -> {v}",
                _then(hints, _knob_edit(knob, v)),
            ) for v in wider if knob.kernel == kernel]
    return options


def fusion(region: Region, code: str, inplace: bool) -> list[Option]:
    """No rule-based fusion yet: it needs data-flow analysis across kernels (an LLM's job)."""
    return []


def access_layout(region: Region, code: str, inplace: bool) -> list[Option]:
    """No rule-based layout rewrite yet: block-pointer conversion needs a recognised 2-D pattern."""
    return []


def gpu_reordering(region: Region, code: str, inplace: bool) -> list[Option]:
    """Reordering including the autotune wrap (its candidates fail the CPU pre-screen)."""
    return reordering(region, code, inplace, gpu_only=True)


BUILDERS: dict[str, Callable[[Region, str, bool], list[Option]]] = {
    "tiling": tiling,
    "vectorization": vectorization,
    "fusion": fusion,
    "pipeline": pipeline,
    "reordering": reordering,
    "access_layout": access_layout,
}
