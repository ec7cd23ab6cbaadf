"""`kernelband optimize FILE`: run one job to completion in this process (embedded mode)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernelband.bandit import POLICIES
from kernelband.commands.limit_options import (
    CompileLimit,
    ConfigCompileLimit,
    RunLimit,
    limits_given,
)
from kernelband.commands.policy_params import parse_policy_params
from kernelband.config import get_settings
from kernelband.default_policy import DEFAULT_POLICY
from kernelband.problem.model import PROBLEM_FORMATS, KernelProblem, ProblemLoadError
from kernelband.problem.translate import translation_refusal
from kernelband.profile.perf_harness import HarnessError, with_perf_harness
from kernelband.sandbox import job_limits, load_problem_sandboxed
from kernelband.scheduling.embedded import (
    JobOptions,
    JobOutcome,
    parse_targets,
    run_local_job,
    write_best,
)
from kernelband.scheduling.pipeline import StepReport

console = Console()


def register(app: typer.Typer) -> None:
    """Add the `optimize` command to the CLI."""
    app.command("optimize")(optimize)


def optimize(
    file: Annotated[Path, typer.Argument(help="Problem file (native, tritonbench or kernelbench).")],
    format: Annotated[str, typer.Option("--format", help="native | tritonbench | kernelbench")] = "native",
    target: Annotated[list[str] | None, typer.Option("--target", help="cpu, h100, a100, h200, rtx4090; repeat or comma-separate")] = None,
    policy: Annotated[str, typer.Option(help="Bandit policy (hwucb, kernelband, kernelband+prior, bon, refine, random, ucb1).")] = DEFAULT_POLICY,
    param: Annotated[list[str] | None, typer.Option("--param", help="Policy parameter NAME=VALUE (repeatable; VALUE as JSON), e.g. --param temperature=2 --param theta_sat='{\"dram\": 60}'; see docs/bandit.md.")] = None,
    budget: Annotated[int, typer.Option(help="Iterations (generations) per target.")] = 20,
    model: Annotated[str, typer.Option(help="LLM model for litellm; empty: the offline rules generator.")] = "",
    parallel: Annotated[int, typer.Option(help="Pulls in flight per target.")] = 2,
    out: Annotated[Path, typer.Option(help="Where to write the best kernel.")] = Path("best.py"),
    seed: Annotated[int, typer.Option(help="Seed of the policy and the generator.")] = 0,
    max_tokens: Annotated[int | None, typer.Option(help="LLM token budget of the job.")] = None,
    max_usd: Annotated[float | None, typer.Option(help="LLM cost budget (USD) of the job.")] = None,
    max_wall_s: Annotated[float | None, typer.Option(help="Wall-time budget in seconds.")] = None,
    repair_turns: Annotated[int, typer.Option(help="Repair turns a failed child gets in its pull (LLM only, 0-5).")] = 1,
    dedupe: Annotated[bool, typer.Option(help="Record children equal to one already tried as duplicates instead of evaluating them.")] = True,
    perf: Annotated[Path | None, typer.Option("--perf", help="TritonBench-G: time on this NAME_perf.py harness (call_op alone).")] = None,
    run_limit: RunLimit = None,
    compile_limit: CompileLimit = None,
    config_compile_limit: ConfigCompileLimit = None,
) -> None:
    """Optimize FILE's kernel with the bandit search and write the best verified version."""
    options = _options(target, policy, budget, model, parallel, seed, max_tokens, max_usd,
                       max_wall_s, param)
    if not 0 <= repair_turns <= 5:
        _fail(f"--repair-turns must be between 0 and 5; got {repair_turns}")
    options = replace(options, repair_turns=repair_turns, dedupe=dedupe,
                      limits=limits_given(run_limit, compile_limit, config_compile_limit))
    _refuse_untranslatable(file, format, options.model)
    with job_limits(options.limits):  # loading runs the file: the job's limits apply
        problem = _with_perf(_load(file, format), perf)
    settings = get_settings()
    console.print(f"[bold]{problem.name}[/]: {len(problem.cases)} public + "
                  f"{len(problem.held_out_cases)} held-out cases; targets "
                  f"{', '.join(options.targets)}; policy {options.policy}"
                  f"{_params_text(options.policy_params)}; "
                  f"generator {options.model or 'rules (offline)'}")
    outcome = _run_with_progress(settings, problem, options)
    console.print(outcome_table(outcome))
    for track in outcome.tracks:
        if track.reason:
            console.print(f"{track.target}: {track.status} ({track.reason})")
    for path in write_best(outcome, problem, out):
        console.print(f"best kernel written to [bold]{path}[/]")
    if outcome.status != "completed":
        console.print(f"[red]job {outcome.status}[/]: {outcome.reason or 'see the table'}")
        raise typer.Exit(1)


def _options(target: list[str] | None, policy: str, budget: int, model: str, parallel: int,
             seed: int, max_tokens: int | None, max_usd: float | None,
             max_wall_s: float | None, param: list[str] | None = None) -> JobOptions:
    if policy not in POLICIES:
        _fail(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    try:
        params = parse_policy_params(param, policy)
    except ValueError as exc:
        _fail(str(exc))
    if budget < 1 or parallel < 1:
        _fail("--budget and --parallel must be at least 1")
    try:
        targets = parse_targets(target or ["cpu"])
    except ValueError as exc:
        _fail(str(exc))
    return JobOptions(targets=targets, policy=policy, policy_params=params, budget=budget,
                      model=model, parallel=parallel, seed=seed, budget_tokens=max_tokens,
                      budget_usd=max_usd, budget_wall_s=max_wall_s)


def _params_text(params: dict[str, Any]) -> str:
    """The banner's "(c=1.5, k=1)"; empty when the policy runs with its defaults."""
    return f" ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else ""


def _with_perf(problem: KernelProblem, perf: Path | None) -> KernelProblem:
    if perf is None:
        return problem
    try:
        return with_perf_harness(problem, perf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, HarnessError) as exc:
        _fail(f"{perf} cannot time this problem: {exc}")


def _refuse_untranslatable(file: Path, format: str, model: str) -> None:
    """A KernelBench file as published needs an LLM to translate it: refuse it at once."""
    try:
        source = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return  # _load reports it
    if reason := translation_refusal(source, format, model):
        _fail(f"{file} is refused: {reason}")


def _load(file: Path, format: str) -> KernelProblem:
    if format not in PROBLEM_FORMATS:
        _fail(f"unknown format {format!r}; choose from {', '.join(PROBLEM_FORMATS)}")
    if not file.is_file():
        _fail(f"{file} does not exist or is not a file; pass the path of a problem file")
    try:
        return load_problem_sandboxed(file.read_text(), format, file.stem)
    except ProblemLoadError as exc:
        _fail(f"{file} is not a valid {format} problem: {exc}")


def _run_with_progress(settings: Any, problem: Any, options: JobOptions) -> JobOutcome:
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("iterations", total=options.budget * len(options.targets))

        def on_step(_report: StepReport, done: dict[str, int]) -> None:
            bar.update(task, completed=done["done"], total=done["total"])

        return run_local_job(settings, problem, options, on_step=on_step)


def outcome_table(outcome: JobOutcome) -> Table:
    """Best speedup per target with its label, held-out verdict, tokens and cost."""
    cost = f"${outcome.cost_usd:.4f}" + ("" if outcome.cost_known else " (partly unknown)")
    resumed = " (resumed after an interrupted run)" if outcome.resumed else ""
    table = Table(title=f"job {outcome.job_id}{resumed}: {outcome.status} in {outcome.wall_s:.1f}s; "
                        f"tokens {outcome.tokens}; cost {cost}")
    for column in ("target", "status", "speedup [95% interval]", "label", "ms: original -> best",
                   "held-out"):
        table.add_column(column, no_wrap=True)  # labels must never be cut off
    for t in outcome.tracks:
        table.add_row(t.target, t.status, t.speedup_text, t.label or "-",
                      f"{_ms(t.original_time_ms)} -> {_ms(t.best_time_ms)}", t.held_out or "-")
    lineages = "; ".join(f"{t.target}: {' -> '.join(t.lineage) or 'original'}"
                         for t in outcome.tracks)
    attempts = ", ".join(f"{k} {n}" for k, n in sorted(outcome.attempts.items()))
    table.caption = f"best lineage {lineages}\nattempts: {attempts}"
    if outcome.stages:  # where the time went: worker seconds per step, median per attempt
        table.caption += "\ntime per step: " + "; ".join(s.text() for s in outcome.stages)
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _fail(message: str) -> NoReturn:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(2)

