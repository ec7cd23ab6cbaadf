"""Block-size knobs of a region, and which values each may safely take."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelband.generate.rules.analysis import KernelInfo, Region, is_blockish
from kernelband.parse import parse


@dataclass(frozen=True)
class Knob:
    """A tile size that can change: a `NAME = int` constant, a launch literal, or a default."""

    kind: str  # "constant" | "launch_literal" | "default"
    name: str  # constant name, or the kernel's constexpr parameter
    kernel: str
    current: int
    partitions: bool  # the grid is computed from it (cdiv), so any size stays covered
    grid_literal: bool = False  # the literal is also a cdiv divisor (grid): change both

    def values(self, info: KernelInfo) -> list[int]:
        """Powers of two near the current size and the kernel's sane bounds."""
        if self.name.upper().startswith("GROUP"):
            return [v for v in (1, 2, 4, 8, 16) if v != self.current]
        lo, hi = (16, 256) if info.uses_dot else (32, 8192)
        grow_only = not (self.partitions or self.name in info.loop_params)
        candidates = [2**k for k in range(4, 14) if lo <= 2**k <= hi and 2**k != self.current]
        near = [v for v in candidates if self.current / 4 <= v <= self.current * 8]
        # a block that must cover a whole row (no loop, no cdiv over it) may only grow
        return [v for v in near if v > self.current] if grow_only else near


def _kernel_functions(tree: ast.Module) -> set[ast.AST]:
    found: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            found |= set(ast.walk(node))
    return found


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_cdiv_divisor(node: ast.AST, parent: ast.AST) -> bool:
    return (isinstance(parent, ast.Call) and ast.unparse(parent.func).split(".")[-1] == "cdiv"
            and len(parent.args) == 2 and parent.args[1] is node)


def _use_is_safe(node: ast.Name, parent: ast.AST) -> bool:
    """A constant used only as a launch argument or a cdiv divisor can change freely."""
    if isinstance(parent, ast.keyword):
        return True
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Subscript) and node in parent.args:
        return True
    return _is_cdiv_divisor(node, parent)


def _int_constants(tree: ast.Module, inside_kernels: set[ast.AST]) -> list[tuple[str, int]]:
    """(name, value) of `NAME = 64` and `BM, BN = 64, 32` assignments outside kernels."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1) or node in inside_kernels:
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts, strict=True))
        found += [(t.id, v.value) for t, v in pairs if isinstance(t, ast.Name)
                  and isinstance(v, ast.Constant) and type(v.value) is int and is_blockish(t.id)]
    return found


def _constant_knobs(region: Region, tree: ast.Module) -> list[Knob]:
    inside_kernels, parents = _kernel_functions(tree), _parents(tree)
    knobs: list[Knob] = []
    for name, current in _int_constants(tree, inside_kernels):
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name and n not in inside_kernels]
        uses = [n for n in names if isinstance(n.ctx, ast.Load)]
        if len(names) - len(uses) != 1 or not uses or not all(_use_is_safe(n, parents[n]) for n in uses):
            continue
        partitions = any(_is_cdiv_divisor(n, parents[n]) for n in uses)
        for launch in region.launches:
            info = region.kernels[launch.kernel]
            params = [k for k, v in launch.keywords.items() if v == name]
            params += [info.params[i] for i, v in enumerate(launch.positional) if v == name and i < len(info.params)]
            knobs += [Knob("constant", name, launch.kernel, current, partitions)
                      for p in params[:1] if p in info.constexprs]
    return knobs


def _literal_uses(tree: ast.Module, value: int) -> tuple[int, int]:
    """(cdiv divisors, other uses) of the integer `value` outside kernels (the launch keyword excluded)."""
    inside_kernels, parents = _kernel_functions(tree), _parents(tree)
    divisors = others = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value == value and node not in inside_kernels:
            parent = parents.get(node)
            if _is_cdiv_divisor(node, parent) if parent else False:
                divisors += 1
            elif not isinstance(parent, ast.keyword):
                others += 1
    return divisors, others


def _literal_knobs(region: Region, tree: ast.Module) -> list[Knob]:
    knobs: list[Knob] = []
    for launch in region.launches:
        info = region.kernels[launch.kernel]
        for key, value in launch.keywords.items():
            if key not in info.constexprs or not is_blockish(key) or not value.isdigit():
                continue
            divisors, others = _literal_uses(tree, int(value))
            if others:
                continue  # the same number used otherwise may size the grid: leave it alone
            knobs.append(Knob("launch_literal", key, launch.kernel, int(value), divisors > 0, divisors > 0))
    return knobs


def _default_knobs(region: Region) -> list[Knob]:
    knobs: list[Knob] = []
    for info in region.kernels.values():
        launches = region.launches_of(info.name)
        for name, default in info.constexprs.items():
            passed = any(name in launch.keywords for launch in launches)
            if default is not None and is_blockish(name) and launches and not passed:
                meta_grid = all("meta" in launch.grid_code for launch in launches)
                knobs.append(Knob("default", name, info.name, default, meta_grid))
    return knobs


def find_knobs(region: Region, code: str) -> list[Knob]:
    """Every block-size knob whose launched kernel masks its partial blocks."""
    tree = parse(code)
    knobs = _constant_knobs(region, tree) + _literal_knobs(region, tree) + _default_knobs(region)
    return [k for k in knobs if region.kernels[k.kernel].masked and not region.kernels[k.kernel].autotuned]
