"""`kernelband profile FILE --target h100`: static profile, estimate, phi and h, each labelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kernelband.problem.model import ProblemLoadError
from kernelband.profile import MeasureError, UnknownTargetError, static_profile_candidate
from kernelband.profile.archs import DEFAULT_REFERENCE_GPU, TARGETS, resolve_target
from kernelband.sandbox import load_problem_sandboxed


def _static_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"static profile for {report['arch']} (label: static, AOT compile, no GPU)")
    for column in ("case", "kernel", "grid", "warps/stages", "regs", "smem B", "local B",
                   "occupancy (limiter)", "access bits"):
        table.add_column(column)
    for case in report["cases"]:
        for item in case["launches"]:
            s, launch, est = item["static"], item["launch"], item["estimate"]
            table.add_row(case["case"], s["kernel_name"], "x".join(map(str, launch["grid"])),
                          f"{s['num_warps']}/{s['num_stages']}", str(s["registers_per_thread"]),
                          str(s["shared_mem_bytes"]), str(s["local_bytes"]),
                          f"{s['occupancy']['occupancy_pct']:.1f}% ({s['occupancy']['limiter']})",
                          f"{est['load_bits']:.0f}")
    return table


def _sass_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for case in report["cases"]:
        for item in case["launches"]:
            s = item["static"]
            mix = " ".join(f"{k}={v}" for k, v in s["sass"].items() if k != "other")
            lines.append(f"SASS mix ({s['arch']}, static) {case['case']}/{s['kernel_name']}: {mix}")
    return lines


def _estimate_table(report: dict[str, Any]) -> Table:
    m = report["measurement"]
    table = Table(title=f"{m['label']} time: {m['method']}")
    for column in ("case", "time (estimated)", "limiter", "waves", "bytes", "bandwidth eff."):
        table.add_column(column)
    for case in report["cases"]:
        for item in case["launches"]:
            e = item["estimate"]
            table.add_row(case["case"], f"{e['time_ms'] * 1e3:.2f} us (estimated)", e["limiter"],
                          str(e["waves"]), str(e["bytes_moved"]), f"{e['bandwidth_efficiency']:.2f}")
    table.add_row("total", f"{m['time_ms'] * 1e3:.2f} us ({m['label']})", "", "", "", "")
    return table


def _features_table(report: dict[str, Any]) -> Table:
    table = Table(title="features (phi: behaviour, h: hardware signature)")
    for column in ("feature", "value", "source"):
        table.add_column(column)
    for name, item in report["features_named"].items():
        table.add_row(name, f"{item['value']:.3f}", item["source"])
    return table


def print_report(report: dict[str, Any]) -> None:
    """The report as rich tables; every number shows its label."""
    console = Console()
    console.print(_static_table(report))
    for line in _sass_lines(report):
        console.print(line, highlight=False)
    for table in (_estimate_table(report), _features_table(report)):
        console.print(table)
    console.print(f"GPU figures: {report['gpu_source']}. Limits: {report['limits_source']}.")


def profile_command(
    file: Annotated[Path, typer.Argument(help="A problem file (native, tritonbench or kernelbench).")],
    target: Annotated[str, typer.Option(help=f"One of {', '.join(TARGETS)}.")] = "h100",
    problem_format: Annotated[str, typer.Option("--problem-format", help="native | tritonbench | kernelbench")] = "native",
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    reference_gpu: Annotated[str, typer.Option(help="GPU the `cpu` target estimates for.")] = DEFAULT_REFERENCE_GPU,
) -> None:
    """Profile the kernel of FILE for a GPU type without a GPU (static profile + estimate)."""
    if output not in ("text", "json"):
        typer.echo(f"--format must be text or json, not {output!r}.", err=True)
        raise typer.Exit(2)
    try:
        resolve_target(target, reference_gpu)
    except UnknownTargetError as exc:
        typer.echo(f"cannot profile {file}: {exc}", err=True)
        raise typer.Exit(1) from exc
    if not file.is_file():
        typer.echo(f"{file} is not a file: pass the path of a problem file.", err=True)
        raise typer.Exit(2)
    try:
        problem = load_problem_sandboxed(file.read_text(), problem_format, file.stem)
        report = static_profile_candidate(problem, None, target, reference_gpu=reference_gpu)
    except (ProblemLoadError, MeasureError, UnknownTargetError) as exc:
        typer.echo(f"cannot profile {file}: {exc}", err=True)
        raise typer.Exit(1) from exc
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        print_report(report)


def register(app: typer.Typer) -> None:
    """Add `kernelband profile`."""
    app.command("profile")(profile_command)
