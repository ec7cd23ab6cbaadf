"""`kernelband bench-policies`: the bandit policy benchmark on simulated landscapes and replay tables (possibly measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelband.policy_bench import measured, section


def bench_policies(
    quick: Annotated[bool, typer.Option("--quick", help="10 seeds, T=20 (about a minute)")] = False,
    replay: Annotated[
        Path | None, typer.Option(help="replay table (JSON, see bench/replay/README.md)")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="draw the speedup curves into this PNG")] = None,
    measured_corpus: Annotated[Path | None, typer.Option(
        "--measured", help="instead: every registered policy on this recorded corpus folder, "
                           "and the default policy by that evidence")] = None,
) -> None:
    """Compare bandit policies on SIMULATED reward landscapes (and a replay table)."""
    if replay is not None and not replay.exists():
        raise typer.BadParameter(f"replay table {replay} does not exist; pass a JSON file or a "
                                 "folder in the format of bench/replay/README.md")
    if measured_corpus is not None:
        typer.echo(measured.run(measured_corpus, quick))
    else:
        typer.echo(section.run(quick, replay, plot))


def register(app: typer.Typer) -> None:
    """Add `bench-policies` to the CLI."""
    app.command("bench-policies")(bench_policies)
