"""`kernelband bench-policies`: the bandit policy benchmark on simulated landscapes and replay tables (possibly measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelband.policy_bench.section import run


def bench_policies(
    quick: Annotated[bool, typer.Option("--quick", help="10 seeds, T=20 (about a minute)")] = False,
    replay: Annotated[
        Path | None, typer.Option(help="replay table (JSON, see bench/replay/README.md)")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="draw the speedup curves into this PNG")] = None,
) -> None:
    """Compare bandit policies on SIMULATED reward landscapes (and a replay table)."""
    if replay is not None and not replay.exists():
        raise typer.BadParameter(f"replay table {replay} does not exist; pass a JSON file or a "
                                 "folder in the format of bench/replay/README.md")
    typer.echo(run(quick, replay, plot))


def register(app: typer.Typer) -> None:
    """Add `bench-policies` to the CLI."""
    app.command("bench-policies")(bench_policies)
