"""`kernelband bench-policies`: the bandit policy benchmark on simulated landscapes and replay tables (possibly measured)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

REPO_ROOT = Path(__file__).resolve().parents[2]


def _load_bench() -> object:
    """Import bench/policies.py from the source checkout (the benchmark is not packaged)."""
    if not (REPO_ROOT / "bench" / "policy_bench").is_dir():
        raise typer.BadParameter(
            f"the policy benchmark lives in the source tree ({REPO_ROOT / 'bench'}), which this "
            "installation lacks; run it from a git checkout of KernelBand Service"
        )
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import bench.policies

    return bench.policies


def bench_policies(
    quick: Annotated[bool, typer.Option("--quick", help="10 seeds, T=20 (about a minute)")] = False,
    replay: Annotated[
        Path | None, typer.Option(help="replay table (JSON, see bench/replay/README.md)")
    ] = None,
    write: Annotated[
        bool, typer.Option("--write/--no-write", help="update the section of bench/RESULTS.md")
    ] = True,
) -> None:
    """Compare bandit policies on SIMULATED reward landscapes (and a replay table)."""
    if replay is not None and not replay.exists():
        raise typer.BadParameter(f"replay table {replay} does not exist; pass a JSON file or a "
                                 "folder in the format of bench/replay/README.md")
    module = _load_bench()
    out = REPO_ROOT / "bench" / "RESULTS.md" if write else None
    typer.echo(module.run(quick, replay, out))  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    """Add `bench-policies` to the CLI."""
    app.command("bench-policies")(bench_policies)
