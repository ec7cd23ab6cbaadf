"""Read the structure of an editable region: kernels, launch sites and block-size knobs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

_BLOCKISH = re.compile(r"BLOCK|TILE|^B[MNKD]$|^GROUP", re.IGNORECASE)


def is_blockish(name: str) -> bool:
    """Names that conventionally hold tile sizes (BLOCK_SIZE, BLOCK_M, TILE_N, BM, ...)."""
    return bool(_BLOCKISH.search(name))


def dotted(node: cst.CSTNode) -> str:
    """'tl.arange' for an Attribute/Name chain, '' otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else ""
    return ""


def is_kernel(func: cst.FunctionDef) -> bool:
    """True when a decorator is triton.jit / jit (bare or called)."""
    for dec in func.decorators:
        target = dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator
        if dotted(target).split(".")[-1] == "jit":
            return True
    return False


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


@dataclass
class KernelInfo:
    """A @triton.jit function: its parameters and traits that decide which rewrites are safe."""

    name: str
    params: list[str]
    constexprs: dict[str, int | None]  # constexpr name -> integer default (None when absent)
    uses_dot: bool
    masked: bool
    loop_params: set[str]  # constexprs that step a loop (the block need not cover a row)
    autotuned: bool


@dataclass
class Launch:
    """One `kernel[grid](...)` call site."""

    kernel: str
    grid_code: str
    keywords: dict[str, str]  # keyword -> source of the value
    positional: list[str]


@dataclass
class Region:
    """What the rules generator knows about one editable region."""

    module: cst.Module
    kernels: dict[str, KernelInfo] = field(default_factory=dict)
    launches: list[Launch] = field(default_factory=list)

    def launches_of(self, kernel: str) -> list[Launch]:
        return [launch for launch in self.launches if launch.kernel == kernel]


def _constexprs(func: cst.FunctionDef) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for param in func.params.params:
        if param.annotation and dotted(param.annotation.annotation).endswith("constexpr"):
            default = param.default
            found[param.name.value] = int(default.value, 0) if isinstance(default, cst.Integer) else None
    return found


def _loop_params(func: cst.FunctionDef, names: set[str]) -> set[str]:
    used: set[str] = set()
    for loop in m.findall(func, m.For()):
        assert isinstance(loop, cst.For)
        used |= {n.value for n in m.findall(loop.iter, m.Name()) if isinstance(n, cst.Name)} & names
    return used


def _kernel_info(func: cst.FunctionDef) -> KernelInfo:
    body = _code(func.body)
    constexprs = _constexprs(func)
    return KernelInfo(
        name=func.name.value,
        params=[p.name.value for p in func.params.params],
        constexprs=constexprs,
        uses_dot="tl.dot(" in body or "tl.dot (" in body,
        masked="mask=" in body or "boundary_check" in body,
        loop_params=_loop_params(func, set(constexprs)),
        autotuned=any("autotune" in _code(d.decorator) for d in func.decorators),
    )


def launch_of(call: cst.Call) -> tuple[str, cst.BaseExpression] | None:
    """(kernel name, grid expression) when `call` is `name[grid](...)`."""
    func = call.func
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and len(func.slice) == 1:
        index = func.slice[0].slice
        if isinstance(index, cst.Index):
            return func.value.value, index.value
    return None


def analyse(code: str) -> Region:
    """Parse `code` (raises libcst.ParserSyntaxError on invalid code) and collect its structure."""
    module = cst.parse_module(code)
    region = Region(module=module)
    for func in m.findall(module, m.FunctionDef()):
        assert isinstance(func, cst.FunctionDef)
        if is_kernel(func):
            region.kernels[func.name.value] = _kernel_info(func)
    for call in m.findall(module, m.Call()):
        assert isinstance(call, cst.Call)
        found = launch_of(call)
        if found and found[0] in region.kernels:
            region.launches.append(Launch(
                kernel=found[0],
                grid_code=_code(found[1]),
                keywords={a.keyword.value: _code(a.value) for a in call.args if a.keyword},
                positional=[_code(a.value) for a in call.args if not a.keyword and not a.star],
            ))
    return region
