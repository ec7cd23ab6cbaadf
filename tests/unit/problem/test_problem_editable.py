"""Editable regions: extraction, splicing and candidate normalisation (pure text)."""

from __future__ import annotations

import pytest

from kernelband.problem.editable import (
    BEGIN_MARKER,
    END_MARKER,
    extract_region,
    normalize_candidate,
    splice_region,
)
from kernelband.problem.model import Case, KernelProblem, ProblemLoadError

NATIVE = f"""import triton
{BEGIN_MARKER}
@triton.jit
def k(x):
    pass


def entry(x):
    return x
{END_MARKER}
CASES = []
"""

TRITONBENCH = """import triton

@triton.jit
def k(x):
    pass

def launch(x):
    return x
####################################################
def test_launch():
    return {"a": launch(1)}
"""


def _problem(source: str, format: str, entry: str) -> KernelProblem:
    return KernelProblem(
        name="p",
        format=format,  # type: ignore[arg-type]
        source=source,
        editable=extract_region(source, format),
        entry=entry,
        kernel_names=("k",),
        cases=(Case("c"),),
        held_out_cases=(),
    )


def test_native_region_is_text_between_markers() -> None:
    region = extract_region(NATIVE, "native")
    assert region.startswith("@triton.jit\n") and region.endswith("return x\n")
    assert BEGIN_MARKER not in region and END_MARKER not in region


@pytest.mark.parametrize(("source", "format"), [(NATIVE, "native"), (TRITONBENCH, "tritonbench")])
def test_splice_of_own_region_round_trips(source: str, format: str) -> None:
    assert splice_region(source, format, extract_region(source, format)) == source


@pytest.mark.parametrize(("source", "format"), [(NATIVE, "native"), (TRITONBENCH, "tritonbench")])
def test_splice_replaces_only_the_region(source: str, format: str) -> None:
    new_region = "def entry(x):\n    return 2 * x\n"
    spliced = splice_region(source, format, new_region)
    assert extract_region(spliced, format) == new_region
    outside_old = source.replace(extract_region(source, format), "")
    assert spliced.replace(new_region, "") == outside_old


def test_tritonbench_region_is_everything_above_separator() -> None:
    region = extract_region(TRITONBENCH, "tritonbench")
    assert "def launch" in region and "test_launch" not in region


def test_missing_markers_are_reported() -> None:
    with pytest.raises(ProblemLoadError, match="no editable region"):
        extract_region("def entry():\n    pass\n", "native")


def test_duplicate_markers_are_reported() -> None:
    with pytest.raises(ProblemLoadError, match="exactly one"):
        extract_region(NATIVE + BEGIN_MARKER + "\n", "native")


def test_reversed_markers_are_reported_with_line() -> None:
    source = f"{END_MARKER}\nx = 1\n{BEGIN_MARKER}\n"
    with pytest.raises(ProblemLoadError) as err:
        extract_region(source, "native")
    assert err.value.line == 1


def test_missing_separator_is_reported() -> None:
    with pytest.raises(ProblemLoadError, match="separator"):
        extract_region("def f():\n    pass\n", "tritonbench")


def test_normalize_accepts_whole_file_and_bare_region() -> None:
    problem = _problem(NATIVE, "native", "entry")
    region = extract_region(NATIVE, "native")
    assert normalize_candidate(problem, NATIVE) == region
    assert normalize_candidate(problem, region) == region


def test_normalize_strips_markdown_fence() -> None:
    problem = _problem(NATIVE, "native", "entry")
    fenced = "Here it is:\n```python\ndef entry(x):\n    return x\n```\nDone."
    assert normalize_candidate(problem, fenced) == "def entry(x):\n    return x\n"


def test_normalize_tritonbench_takes_code_above_separator() -> None:
    problem = _problem(TRITONBENCH, "tritonbench", "launch")
    assert normalize_candidate(problem, TRITONBENCH) == extract_region(TRITONBENCH, "tritonbench")


def test_normalize_rejects_candidate_without_entry() -> None:
    problem = _problem(NATIVE, "native", "entry")
    with pytest.raises(ProblemLoadError, match="does not define 'entry'"):
        normalize_candidate(problem, "def other(x):\n    return x\n")


def test_normalize_rejects_syntax_error_with_line() -> None:
    problem = _problem(NATIVE, "native", "entry")
    with pytest.raises(ProblemLoadError, match="syntax error") as err:
        normalize_candidate(problem, "def entry(x):\n    return (x\n")
    assert err.value.line is not None


def test_normalize_rejects_whole_file_without_markers() -> None:
    problem = _problem(NATIVE, "native", "entry")
    whole = "def entry(x):\n    return x\n\ndef make_inputs(case, device, seed):\n    return []\n"
    with pytest.raises(ProblemLoadError, match="without editable markers"):
        normalize_candidate(problem, whole)


def test_problem_splice_uses_its_format() -> None:
    problem = _problem(NATIVE, "native", "entry")
    assert "return 3 * x" in problem.splice("def entry(x):\n    return 3 * x\n")
