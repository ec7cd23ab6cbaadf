"""`kernelband check PROBLEM [--candidate FILE]`: is the kernel (or a candidate) correct?

Exit codes: 0 correct, 1 rejected, 2 the problem or the candidate could not be loaded. A
KernelBench file as published (PyTorch only) is checked as far as it goes: its Model runs and
agrees with itself; the output says it needs translation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from kernelband.commands.limit_options import (
    CompileLimit,
    ConfigCompileLimit,
    RunLimit,
    limits_given,
)
from kernelband.evaluate import evaluate_candidate
from kernelband.evaluate.verdict import Verdict
from kernelband.problem.editable import normalize_candidate
from kernelband.problem.model import PROBLEM_FORMATS, KernelProblem, ProblemLoadError
from kernelband.profile.perf_harness import HarnessError, with_perf_harness
from kernelband.sandbox import job_limits, load_problem_sandboxed


@dataclass(frozen=True)
class CheckOutcome:
    """What `kernelband check` found: a verdict, or why the problem did not load."""

    problem: KernelProblem | None
    verdict: Verdict | None
    load_error: str = ""

    @property
    def accepted(self) -> bool:
        return self.verdict is not None and self.verdict.correct


def check_problem_source(
    source: str, format: str, name: str, *, seeds: int = 3, held_out: bool = True
) -> CheckOutcome:
    """Load `source` in the sandbox and check its original kernel (the `check` command's path)."""
    try:
        problem = load_problem_sandboxed(source, format, name)
    except ProblemLoadError as exc:
        return CheckOutcome(None, None, str(exc))
    return CheckOutcome(problem, evaluate_candidate(problem, None, held_out=held_out, seeds=seeds))


def _fail_load(what: str, reason: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"loaded": False, "what": what, "reason": reason}))
    else:
        typer.echo(f"could not load the {what}: {reason}", err=True)
    raise typer.Exit(2)


def check(
    problem_file: Annotated[Path, typer.Argument(help="The problem file.")],
    format: Annotated[str, typer.Option("--format", help="native | tritonbench | kernelbench")] = "native",
    candidate: Annotated[Path | None, typer.Option("--candidate", help="A candidate: whole file or region.")] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Seeds per case.")] = 3,
    public_only: Annotated[bool, typer.Option("--public-only", help="Skip the held-out cases.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    perf: Annotated[Path | None, typer.Option("--perf", help="TritonBench-G: the NAME_perf.py harness that times the problem (checked here).")] = None,
    run_limit: RunLimit = None,
    compile_limit: CompileLimit = None,
    config_compile_limit: ConfigCompileLimit = None,
) -> None:
    """Check the original kernel (or --candidate) against the reference, in the sandbox."""
    with job_limits(limits_given(run_limit, compile_limit, config_compile_limit)):
        _check(problem_file, format, candidate, seeds, public_only, as_json, perf)


def _check(problem_file: Path, format: str, candidate: Path | None, seeds: int,  # noqa: A002
           public_only: bool, as_json: bool, perf: Path | None) -> None:
    if format not in PROBLEM_FORMATS:
        _fail_load("problem", f"unknown format {format!r}; use one of {', '.join(PROBLEM_FORMATS)}", as_json)
    try:
        source = problem_file.read_text(encoding="utf-8")
        problem = load_problem_sandboxed(source, format, problem_file.stem)
    except (OSError, UnicodeDecodeError, ProblemLoadError) as exc:
        _fail_load("problem", str(exc), as_json)
    if perf is not None:
        try:
            problem = with_perf_harness(problem, perf.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, HarnessError) as exc:
            _fail_load("performance harness", str(exc), as_json)
    editable = None
    if candidate is not None:
        try:
            editable = normalize_candidate(problem, candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ProblemLoadError) as exc:
            _fail_load("candidate", str(exc), as_json)
    verdict = evaluate_candidate(problem, editable, held_out=not public_only, seeds=seeds)
    untranslated = problem.needs_translation and editable is None
    if as_json:
        extra = {"needs_translation": True, "note": TRANSLATION_NOTE} if untranslated else {}
        typer.echo(json.dumps({**verdict.to_dict(), **extra}, default=str))
    else:
        status = "CORRECT" if verdict.correct else "REJECTED"
        what = " (the PyTorch Model; no Triton yet)" if untranslated else ""
        typer.echo(f"{status} {problem.name}{what}: {verdict.message}")
        if untranslated:
            typer.echo(TRANSLATION_NOTE)
    raise typer.Exit(0 if verdict.correct else 1)


TRANSLATION_NOTE = (
    "needs translation: a KernelBench file as published. Model runs as the reference, but there "
    "is no Triton ModelNew to check yet. `kernelband optimize FILE --format kernelbench --model "
    "MODEL` first translates Model into Triton (an LLM generator is needed); `--candidate FILE` "
    "checks a ModelNew of your own against Model.")


def register(app: typer.Typer) -> None:
    """Add `check` to the `kernelband` command."""
    app.command("check")(check)
