"""The editable region of a problem file: find it, replace it, and normalise candidates.

- native and kernelbench: the lines strictly between `# kernelband: editable begin` and
  `# kernelband: editable end` (exactly one pair, each marker alone on its line).
- tritonbench: every line above the first separator line (a comment of 20 or more `#`).

Pure text processing: nothing here imports or executes user code.
"""

from __future__ import annotations

import ast
import re
from typing import Protocol

from kernelband.parse import parse
from kernelband.problem.errors import ProblemLoadError

BEGIN_MARKER = "# kernelband: editable begin"
END_MARKER = "# kernelband: editable end"
_SEPARATOR = re.compile(r"^\s*#{20,}\s*$")
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


class RegionOwner(Protocol):
    """What normalising a candidate reads of its problem (a `KernelProblem` is one)."""

    @property
    def format(self) -> str: ...

    @property
    def entry(self) -> str: ...


def _is_marker(line: str, marker: str) -> bool:
    return " ".join(line.strip().lower().split()) == marker


def _marker_lines(source: str) -> tuple[int, int] | None:
    """Indexes of the begin and end marker lines, or None when the file has neither."""
    lines = source.splitlines()
    begins = [i for i, line in enumerate(lines) if _is_marker(line, BEGIN_MARKER)]
    ends = [i for i, line in enumerate(lines) if _is_marker(line, END_MARKER)]
    if not begins and not ends:
        return None
    if len(begins) != 1 or len(ends) != 1:
        raise ProblemLoadError(
            f"expected exactly one '{BEGIN_MARKER}' and one '{END_MARKER}' line, found "
            f"{len(begins)} and {len(ends)}; keep a single pair around the kernels and entry"
        )
    if ends[0] < begins[0]:
        raise ProblemLoadError(
            f"'{END_MARKER}' comes before '{BEGIN_MARKER}'; put the begin marker first",
            line=ends[0] + 1,
        )
    return begins[0], ends[0]


def separator_line(source: str) -> int | None:
    """Index of the first TritonBench separator line (20+ '#'), or None."""
    for i, line in enumerate(source.splitlines()):
        if _SEPARATOR.match(line):
            return i
    return None


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def extract_region(source: str, format: str) -> str:
    """The editable region of a complete problem file in `format`."""
    lines = source.splitlines()
    if format == "tritonbench":
        sep = separator_line(source)
        if sep is None:
            raise ProblemLoadError(
                "no separator line found: a TritonBench file needs a line of 20 or more '#' "
                "between the kernel code (above) and the test code (below)"
            )
        return _join(lines[:sep])
    if format not in ("native", "kernelbench"):
        raise ProblemLoadError(f"unknown format {format!r}; use native, tritonbench or kernelbench")
    found = _marker_lines(source)
    if found is None:
        raise ProblemLoadError(
            f"no editable region: put '{BEGIN_MARKER}' and '{END_MARKER}' on their own lines "
            "around the Triton kernels and the entry function"
        )
    begin, end = found
    return _join(lines[begin + 1 : end])


def region_offset(source: str, format: str) -> int:
    """How many lines of `source` come before its editable region."""
    if format == "tritonbench":
        return 0
    found = _marker_lines(source)
    return 0 if found is None else found[0] + 1


def splice_region(source: str, format: str, editable: str) -> str:
    """`source` with its editable region replaced by `editable` (markers and the rest kept)."""
    lines = source.splitlines()
    region = editable.rstrip("\n").splitlines()
    if format == "tritonbench":
        sep = separator_line(source)
        if sep is None:
            raise ProblemLoadError("no separator line of 20+ '#' found in the TritonBench file")
        return _join(region + lines[sep:])
    extract_region(source, format)  # validates the markers with a helpful error
    found = _marker_lines(source)
    assert found is not None
    begin, end = found
    return _join(lines[: begin + 1] + region + lines[end:])


def _strip_fence(text: str) -> str:
    """The code inside a Markdown fence when an LLM wrapped its answer in one."""
    blocks = _FENCE.findall(text)
    return max(blocks, key=len) if blocks else text


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _looks_like_whole_problem(names: set[str], format: str) -> bool:
    if format == "native":
        return "make_inputs" in names or "CASES" in names
    return format == "kernelbench" and {"Model", "get_inputs"} <= names


def parse_region(region: str, what: str = "candidate") -> ast.Module:
    """Parse `region`, turning a SyntaxError into a ProblemLoadError with its line."""
    try:
        return parse(region)
    except SyntaxError as exc:
        raise ProblemLoadError(
            f"{what} has a syntax error: {exc.msg}; fix the code and submit it again",
            line=exc.lineno,
        ) from exc


def _region_of_candidate(format: str, text: str) -> str:
    if format == "tritonbench":
        return extract_region(text, format) if separator_line(text) is not None else text
    if _marker_lines(text) is not None:
        return extract_region(text, format)
    names = _top_level_names(parse_region(text))
    if _looks_like_whole_problem(names, format):
        raise ProblemLoadError(
            f"the candidate is a whole problem file without editable markers; keep the "
            f"'{BEGIN_MARKER}' / '{END_MARKER}' lines or send only the region"
        )
    return text


def normalize_candidate(problem: RegionOwner, text: str) -> str:
    """A candidate (whole file or bare region, maybe fenced) as a bare editable region."""
    region = _region_of_candidate(problem.format, _strip_fence(text).strip("\n") + "\n")
    names = _top_level_names(parse_region(region))
    if problem.entry not in names:
        raise ProblemLoadError(
            f"the candidate does not define {problem.entry!r} at top level; the region must "
            f"hold the Triton kernels and the entry {problem.entry!r} with the same name"
        )
    return region
