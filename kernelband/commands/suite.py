"""`kernelband suite DIR`: every problem of a directory as one campaign, embedded or on a server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from kernelband.bandit import DEFAULT_POLICY, POLICIES
from kernelband.commands.limit_options import (
    CompileLimit,
    ConfigCompileLimit,
    RunLimit,
    limits_given,
)
from kernelband.config import get_settings
from kernelband.problem.model import PROBLEM_FORMATS
from kernelband.problem.translate import suite_translation_refusal
from kernelband.sandbox import job_limits, load_problem_sandboxed
from kernelband.scheduling.embedded import parse_targets
from kernelband.suite import (
    SuiteReport,
    SuiteSettings,
    SuiteSourceError,
    attach_perf_dir,
    load_sources,
    read_directory,
    to_csv,
    to_json,
)
from kernelband.suite.embedded import run_local_suite
from kernelband.suite.model import SUITE_PARALLELISM
from kernelband.suite.remote import RemoteSuiteError, run_remote_suite
from kernelband.suite.throughput import DEVICE_KINDS, timed_share

console = Console()


def register(app: typer.Typer) -> None:
    """Add the `suite` command to the CLI."""
    app.command("suite")(suite)


def suite(
    directory: Annotated[Path, typer.Argument(help="Folder of problem files (*.py).")],
    format: Annotated[str, typer.Option("--format", help="tritonbench | kernelbench | native")] = "native",
    policy: Annotated[list[str] | None, typer.Option("--policy", help="Repeat for a side-by-side; default kernelband.")] = None,
    target: Annotated[list[str] | None, typer.Option("--target", help="cpu, h100, a100, h200, rtx4090; repeat or comma-separate.")] = None,
    budget: Annotated[int, typer.Option(help="Iterations per problem and target.")] = 20,
    model: Annotated[str, typer.Option(help="LLM model; empty: the offline rules generator.")] = "",
    parallel: Annotated[int, typer.Option(help="Pulls in flight per track; 1 keeps a job's search path independent of result arrival order.")] = SUITE_PARALLELISM,
    seed: Annotated[int, typer.Option(help="Seed of every job.")] = 0,
    server: Annotated[str | None, typer.Option(help="API URL; without it the suite runs embedded.")] = None,
    token: Annotated[str | None, typer.Option(help="Team token for --server.", envvar="KERNELBAND_TOKEN")] = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Write the per-problem table as CSV.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the whole report as JSON.")] = None,
    perf_dir: Annotated[Path | None, typer.Option("--perf-dir", help="Folder of NAME_perf.py TritonBench-G harnesses (NAME_perf.py beside NAME.py is found anyway).")] = None,
    run_limit: RunLimit = None,
    compile_limit: CompileLimit = None,
    config_compile_limit: ConfigCompileLimit = None,
) -> None:
    """Optimize every problem in DIRECTORY, one job per (problem, policy), and report suite metrics."""
    settings = _settings(policy, target, budget, model, parallel, seed,
                         limits_given(run_limit, compile_limit, config_compile_limit))
    try:
        sources = read_directory(directory)
        if perf_dir is not None:
            sources = attach_perf_dir(sources, perf_dir)
    except SuiteSourceError as exc:
        _fail(str(exc))
    named = [(s.name, s.source) for s in sources]
    if refusal := suite_translation_refusal(named, format, settings.model):
        _fail(f"the suite is refused: {refusal}")
    console.print(f"[bold]{directory.name}[/]: {len(sources)} {format} problem files; policies "
                  f"{', '.join(settings.policies)}; targets {', '.join(settings.targets)}; "
                  f"budget {settings.budget}; generator {settings.model or 'rules (offline)'}")
    if server:
        report = _run_remote(server, token, directory.name, format, sources, settings)
    else:
        report = _run_embedded(directory.name, format, sources, settings)
    show_report(report)
    _export(report, csv, json_out)


def _settings(policy: list[str] | None, target: list[str] | None, budget: int, model: str,
              parallel: int, seed: int, limits: dict[str, float]) -> SuiteSettings:
    policies = tuple(dict.fromkeys(policy or [DEFAULT_POLICY]))
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        _fail(f"unknown policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    try:
        return SuiteSettings(targets=parse_targets(target or ["cpu"]), policies=policies,
                             model=model, budget=budget, parallelism=parallel, seed=seed,
                             limits=limits)
    except ValueError as exc:
        _fail(str(exc))


def _run_embedded(name: str, format: str, sources: Any, settings: SuiteSettings) -> SuiteReport:
    if format not in PROBLEM_FORMATS:
        _fail(f"unknown format {format!r}; choose from {', '.join(PROBLEM_FORMATS)}")
    with job_limits(settings.limits):  # loading runs each file: the suite's limits apply
        problems, failures = load_sources(sources, format, load_problem_sandboxed)
    for failure in failures:
        console.print(f"[yellow]not loaded[/] {failure.name}: {failure.reason}")
    started = time.monotonic()
    last: list[float] = [0.0, -1.0]  # when the last plain line was printed, and its count
    with console.status("running suite") as status:
        def on_progress(done: int, total: int) -> None:
            line = f"jobs finished {done}/{total} ({time.monotonic() - started:.0f}s)"
            status.update(line)
            # piped output (a log, CI) gets a line per finished job and one a minute anyway
            if not console.is_terminal and (done != last[1] or time.monotonic() - last[0] >= 60):
                console.print(line)
                last[:] = [time.monotonic(), float(done)]

        return run_local_suite(get_settings(), name, format, problems, failures, settings,
                               on_progress=on_progress)


def _run_remote(server: str, token: str | None, name: str, format: str, sources: Any,
                settings: SuiteSettings) -> SuiteReport:
    if not token:
        _fail("--server needs --token (or KERNELBAND_TOKEN); create one with "
              "`kernelband tokens create --team NAME`")
    try:
        return run_remote_suite(server, str(token), name, format, sources, settings, console)
    except (RemoteSuiteError, OSError) as exc:
        _fail(f"{exc}; check --server and --token")
    except Exception as exc:  # httpx transport errors
        _fail(f"could not reach {server}: {exc}")


def show_report(report: SuiteReport) -> None:
    """Metrics table, per-problem table and load failures."""
    metrics = Table(title=f"suite {report.suite_id} ({report.name}): "
                          f"{report.jobs_finished}/{len(report.job_ids)} jobs finished")
    for column in ("target", "policy", "problems", "Correct %", "Fast@1 % (95% low > 1)",
                   "Fast@1 % (point, as published)", "geomean (correct)", "geomean (all)",
                   "label", "fast_p % (p=0/1/1.5/2)"):
        metrics.add_column(column)
    for m in report.metrics:
        fast = "/".join(f"{pct:.1f}" for pct in m.fast_p.values()) or "-"
        metrics.add_row(m.target, m.policy, str(m.problems), f"{m.correct_pct:.1f}",
                        f"{m.fast1_pct:.1f}", f"{m.fast1_point_pct:.1f}",
                        _x(m.geomean_speedup_correct), _x(m.geomean_speedup_all), m.label, fast)
    metrics.caption = ("Fast@1 and fast_p count a measured problem only when its paired "
                       "speedup's 95% interval lies above the threshold; geomeans are of the "
                       "paired points.")
    console.print(metrics)
    problems = Table(title="per problem")
    for column in ("problem", "target", "policy", "status", "correct", "speedup [95% interval]",
                   "label"):
        problems.add_column(column, no_wrap=column == "speedup [95% interval]")
    for p in report.problems:
        problems.add_row(p.problem, p.target, p.policy, p.status, "yes" if p.correct else "no",
                         p.shown().text(), p.label or "-")
    console.print(problems)
    for failure in report.load_failures:
        console.print(f"[yellow]failed to load[/] {failure.name}: {failure.reason}")
    for cost in report.throughput:
        console.print(cost.describe())
    gpus = [cost for cost in report.throughput if not cost.estimated]
    if len(gpus) == 1 and report.steps:  # one GPU target: its timed parts are all of the steps'
        parts = [s.parts_total_s for s in report.steps if s.kind in DEVICE_KINDS]
        console.print(f"{gpus[0].target}: GPU held alone for paired timing "
                      f"{timed_share(parts, gpus[0].device_s):.0f}% of the window")
    if report.steps:
        console.print("time per step, all jobs: " + "; ".join(s.text() for s in report.steps))


def _export(report: SuiteReport, csv: Path | None, json_out: Path | None) -> None:
    if csv:
        csv.write_text(to_csv(report))
        console.print(f"CSV written to [bold]{csv}[/]")
    if json_out:
        json_out.write_text(to_json(report))
        console.print(f"JSON written to [bold]{json_out}[/]")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _fail(message: str) -> NoReturn:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(2)
