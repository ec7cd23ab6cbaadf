"""Pull the rewritten editable region out of an LLM reply and check that it is usable."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernelband.parse import parse

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[ \t]*(python|py)?[ \t]*\n", re.IGNORECASE)
_BEGIN = "# kernelband: editable begin"
_END = "# kernelband: editable end"


@dataclass(frozen=True)
class Extraction:
    """The code of a reply, or the reason there is none (`no_code_block`, `syntax_error:line 3`)."""

    code: str
    reason: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


def _fail(reason: str, message: str) -> Extraction:
    return Extraction(code="", reason=reason, message=message)


def _code_blocks(reply: str) -> list[str]:
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    python = [body for lang, body in blocks if lang in ("python", "py")]
    return python or [body for lang, body in blocks if lang == ""]


def _inside_markers(code: str) -> str:
    """A whole-file reply is cut down to its editable region."""
    if _BEGIN in code and _END in code:
        inner = code.split(_BEGIN, 1)[1].split(_END, 1)[0]
        return inner.strip("\n") + "\n"
    return code


def is_triton_kernel(node: ast.AST) -> bool:
    """True for a function decorated with triton.jit (bare, called, or via `jit`)."""
    if not isinstance(node, ast.FunctionDef):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "jit":
            return True
    return False


def check_region(code: str, entry: str) -> Extraction:
    """Parse `code`; it must define `entry` (function or class) and a @triton.jit kernel at
    top level."""
    try:
        tree = parse(code)
    except SyntaxError as exc:
        return _fail(f"syntax_error:line {exc.lineno}", f"the code does not parse: {exc.msg}")
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    # the entry is a function, or a class (KernelBench's `ModelNew`)
    entries = functions + [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if not any(f.name == entry for f in entries):
        found = ", ".join(sorted({f.name for f in entries})) or "none"
        return _fail(f"missing_entry:{entry}", f"no function or class named {entry!r} (found: {found})")
    if not any(is_triton_kernel(f) for f in functions):
        return _fail("missing_kernel", "the code defines no @triton.jit kernel")
    return Extraction(code=code)


def extract_code(reply: str, entry: str, finish_reason: str | None = None) -> Extraction:
    """The editable region in `reply`, validated, or a machine-readable failure reason."""
    if finish_reason == "length":
        return _fail("truncated_reply", "the model stopped at its token limit before finishing")
    blocks = _code_blocks(reply)
    if not blocks:
        if _OPEN_FENCE.search(reply):
            return _fail("truncated_reply", "a code block was opened but never closed")
        return _fail("no_code_block", "the reply holds no ```python fenced code block")
    # prefer the block that defines the entry; models sometimes add a usage snippet after it
    checked = [check_region(_inside_markers(b).strip("\n") + "\n", entry) for b in blocks]
    good = [c for c in checked if c.ok]
    return good[-1] if good else checked[-1]
