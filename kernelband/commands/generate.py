"""`kernelband generate FILE --strategy S [--model M] [--seed N]`: print the diff of one rewrite.

Exit codes: 0 a rewrite was produced, 1 the generator failed (reason printed), 2 bad input.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated

import typer

from kernelband.config import get_settings
from kernelband.generate import GenerationRequest, get_strategy, make_generator
from kernelband.generate.strategies import UnknownStrategyError
from kernelband.problem.model import PROBLEM_FORMATS, ProblemLoadError
from kernelband.sandbox import load_problem_sandboxed


def generate(
    problem_file: Annotated[Path, typer.Argument(help="The problem file.")],
    strategy: Annotated[str, typer.Option(help="tiling | vectorization | fusion | pipeline | reordering | access_layout")] = "tiling",
    model: Annotated[str | None, typer.Option(help="A litellm model string; default: the settings (empty: rules).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: different seeds explore different rewrites.")] = 0,
    format: Annotated[str, typer.Option("--format", help="native | tritonbench | kernelbench")] = "native",
) -> None:
    """Rewrite the problem's kernel once with one strategy and print the unified diff."""
    try:
        get_strategy(strategy)
    except UnknownStrategyError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    if format not in PROBLEM_FORMATS:
        typer.echo(f"unknown format {format!r}; use one of {', '.join(PROBLEM_FORMATS)}", err=True)
        raise typer.Exit(2)
    try:
        problem = load_problem_sandboxed(problem_file.read_text(encoding="utf-8"), format, problem_file.stem)
    except (OSError, UnicodeDecodeError, ProblemLoadError) as exc:
        typer.echo(f"could not load the problem: {exc}", err=True)
        raise typer.Exit(2) from None
    settings = get_settings()
    if model is not None:
        settings = settings.model_copy(update={"llm_model": model})
    result = make_generator(settings).generate(GenerationRequest(problem, problem.editable, strategy, seed=seed))
    if not result.ok:
        typer.echo(f"no rewrite ({result.reason}): {result.message}", err=True)
        raise typer.Exit(1)
    diff = difflib.unified_diff(
        problem.editable.splitlines(keepends=True), result.editable.splitlines(keepends=True),
        fromfile=f"{problem_file.name} (parent)", tofile=f"{problem_file.name} ({strategy}, seed {seed})",
    )
    typer.echo("".join(diff), nl=False)
    cost = f"${result.cost_usd:.5f}" if result.cost_known else "cost unknown"
    notes = "; ".join(result.notes)
    typer.echo(f"# {result.model}: {result.prompt_tokens}+{result.completion_tokens} tokens, {cost}"
               f"{', ' + notes if notes else ''}", err=True)


def register(app: typer.Typer) -> None:
    app.command("generate")(generate)
