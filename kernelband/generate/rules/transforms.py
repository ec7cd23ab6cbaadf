"""Source rewrites on the concrete syntax tree (libcst keeps the user's formatting)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from kernelband.generate.rules.analysis import dotted, is_kernel, launch_of

_NO_SPACE = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


def keyword_arg(name: str, value: str) -> cst.Arg:
    """`name=value` as a call argument."""
    return cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(value), equal=_NO_SPACE)


def set_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """`call` with keyword `name` set to `value` (replaced, or appended when absent)."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword and arg.keyword.value == name:
            args[i] = arg.with_changes(value=cst.parse_expression(value))
            return call.with_changes(args=args)
    if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
        # keep a multi-line call's trailing comma style: the new argument goes after it
        args.append(keyword_arg(name, value).with_changes(comma=args[-1].comma))
    else:
        args.append(keyword_arg(name, value))
    return call.with_changes(args=args)


def drop_keywords(call: cst.Call, names: set[str]) -> cst.Call:
    """`call` without the keyword arguments in `names`."""
    args = [a for a in call.args if not (a.keyword and a.keyword.value in names)]
    if args and call.args:
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)  # keeps the closing layout
    return call.with_changes(args=args)


class _Launches(cst.CSTTransformer):
    def __init__(self, kernels: set[str], edit: Callable[[cst.Call, cst.BaseExpression], cst.Call]):
        self.kernels, self.edit = kernels, edit

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        found = launch_of(updated)
        if found and found[0] in self.kernels:
            return self.edit(updated, found[1])
        return updated


def edit_launches(
    module: cst.Module, kernels: set[str], edit: Callable[[cst.Call, cst.BaseExpression], cst.Call]
) -> cst.Module:
    """Apply `edit(call, grid)` to every launch of the given kernels."""
    return module.visit(_Launches(kernels, edit))


def replace_grid(call: cst.Call, grid: cst.BaseExpression) -> cst.Call:
    """`call` launched with a different grid expression."""
    sub = call.func
    assert isinstance(sub, cst.Subscript)
    element = sub.slice[0].with_changes(slice=cst.Index(value=grid))
    return call.with_changes(func=sub.with_changes(slice=[element]))


class _ReplaceCdivDivisor(cst.CSTTransformer):
    def __init__(self, old: int, new: int) -> None:
        self.old, self.new = old, new

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return not is_kernel(node)  # kernel bodies keep their own arithmetic

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted(updated.func).split(".")[-1] == "cdiv" and len(updated.args) == 2:
            divisor = updated.args[1].value
            if isinstance(divisor, cst.Integer) and int(divisor.value, 0) == self.old:
                args = [updated.args[0], updated.args[1].with_changes(value=cst.Integer(str(self.new)))]
                return updated.with_changes(args=args)
        return updated


def replace_cdiv_divisor_everywhere(module: cst.Module, old: int, new: int) -> cst.Module:
    """`cdiv(x, old)` turned into `cdiv(x, new)` outside the kernels."""
    return module.visit(_ReplaceCdivDivisor(old, new))


class _ReplaceAssign(cst.CSTTransformer):
    def __init__(self, name: str, value: int) -> None:
        self.name, self.value = name, value

    def _swap(self, target: cst.BaseExpression, value: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(target, cst.Name) and target.value == self.name and isinstance(value, cst.Integer):
            return cst.Integer(str(self.value))
        if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
            elements = [v.with_changes(value=self._swap(t.value, v.value))
                        for t, v in zip(target.elements, value.elements, strict=True)]
            return value.with_changes(elements=elements)
        return value

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if len(updated.targets) == 1:
            return updated.with_changes(value=self._swap(updated.targets[0].target, updated.value))
        return updated


def replace_int_assignment(module: cst.Module, name: str, value: int) -> cst.Module:
    """Every `name = <int>` (also inside `a, name = 1, <int>`) assignment set to `value`."""
    return module.visit(_ReplaceAssign(name, value))


class _KernelEdit(cst.CSTTransformer):
    def __init__(self, kernel: str, edit: Callable[[cst.FunctionDef], cst.FunctionDef]) -> None:
        self.kernel, self.edit = kernel, edit

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if updated.name.value == self.kernel and is_kernel(updated):
            return self.edit(updated)
        return updated


def edit_kernel(module: cst.Module, kernel: str, edit: Callable[[cst.FunctionDef], cst.FunctionDef]) -> cst.Module:
    """Apply `edit` to the @triton.jit function named `kernel`."""
    return module.visit(_KernelEdit(kernel, edit))


def set_default(func: cst.FunctionDef, param: str, value: int) -> cst.FunctionDef:
    """The kernel with constexpr `param` defaulting to `value`."""
    params = [
        p.with_changes(default=cst.Integer(str(value))) if p.name.value == param else p
        for p in func.params.params
    ]
    return func.with_changes(params=func.params.with_changes(params=params))


_ARANGE = m.Call(func=m.Attribute(value=m.Name("tl"), attr=m.Name("arange")),
                 args=[m.Arg(value=m.Integer("0")), m.Arg(value=m.Name())])


def block_offsets(stmt: cst.BaseSmallStatement) -> tuple[str, str] | None:
    """(target, BLOCK) for `offs = <pid> * BLOCK + tl.arange(0, BLOCK)` (either order)."""
    if not (isinstance(stmt, cst.Assign) and len(stmt.targets) == 1):
        return None
    target, value = stmt.targets[0].target, stmt.value
    if not (isinstance(target, cst.Name) and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)):
        return None
    for arange, start in ((value.right, value.left), (value.left, value.right)):
        if m.matches(arange, _ARANGE):
            assert isinstance(arange, cst.Call)
            block = arange.args[1].value
            assert isinstance(block, cst.Name)
            if (isinstance(start, cst.BinaryOperation) and isinstance(start.operator, cst.Multiply)
                    and block.value in (dotted(start.left), dotted(start.right))):
                return target.value, block.value
    return None


def add_contiguity_hints(func: cst.FunctionDef) -> cst.FunctionDef:
    """After each block-offset assignment, state it is BLOCK-aligned and contiguous."""
    body: list[cst.BaseStatement | cst.BaseSmallStatement] = []
    for stmt in func.body.body:
        body.append(stmt)
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            found = block_offsets(stmt.body[0])
            if found:
                name, block = found
                body.append(cst.parse_statement(
                    f"{name} = tl.max_contiguous(tl.multiple_of({name}, {block}), {block})\n"
                ))
    return func.with_changes(body=func.body.with_changes(body=tuple(body)))


class _RangeToTlRange(cst.CSTTransformer):
    def __init__(self, stages: int) -> None:
        self.stages = stages

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        it = updated.iter
        if isinstance(it, cst.Call) and dotted(it.func) == "range":
            call = set_keyword(it.with_changes(func=cst.parse_expression("tl.range")), "num_stages", str(self.stages))
            return updated.with_changes(iter=call)
        return updated


def range_to_tl_range(func: cst.FunctionDef, stages: int) -> cst.FunctionDef:
    """Loops over `range(...)` become software-pipelined `tl.range(..., num_stages=stages)`."""
    result = func.visit(_RangeToTlRange(stages))
    assert isinstance(result, cst.FunctionDef)
    return result


def add_decorator(func: cst.FunctionDef, decorator: str) -> cst.FunctionDef:
    """The function with `@decorator` placed above its existing decorators."""
    new = cst.Decorator(decorator=cst.parse_expression(decorator))
    return func.with_changes(decorators=[new, *func.decorators])


class _SwapProgramAxes(cst.CSTTransformer):
    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted(updated.func) == "tl.program_id" and len(updated.args) == 1:
            axis = updated.args[0].value
            if isinstance(axis, cst.Integer) and axis.value in ("0", "1"):
                swapped = cst.Integer("1" if axis.value == "0" else "0")
                return updated.with_changes(args=[updated.args[0].with_changes(value=swapped)])
        return updated


def swap_program_axes(func: cst.FunctionDef) -> cst.FunctionDef:
    """`tl.program_id(0)` and `tl.program_id(1)` exchanged (pairs with a swapped 2-D grid)."""
    result = func.visit(_SwapProgramAxes())
    assert isinstance(result, cst.FunctionDef)
    return result


def swapped_grid(grid: cst.BaseExpression) -> cst.BaseExpression | None:
    """`(b, a)` for a 2-tuple grid `(a, b)`, else None."""
    if isinstance(grid, cst.Tuple) and len(grid.elements) == 2:
        first, second = grid.elements
        return grid.with_changes(elements=[
            second.with_changes(value=second.value, comma=first.comma),
            first.with_changes(value=first.value, comma=second.comma),
        ])
    return None
