"""`kernelband quotas set | show`: the operator's per-team limits (kernelband/usage.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from kernelband import usage
from kernelband.commands.tokens import configured_database
from kernelband.db import repository, session_scope

quotas_app = typer.Typer(no_args_is_help=True, help="Set and show per-team quotas.")

_CLEAR = "Pass a negative value to remove the limit."


@quotas_app.command("set")
def set_(
    team: Annotated[str, typer.Argument(help="Team name.")],
    concurrent_jobs: Annotated[int | None, typer.Option(
        help=f"Unfinished jobs at once (a suite counts once). {_CLEAR}")] = None,
    gpu_seconds_per_day: Annotated[float | None, typer.Option(
        help=f"GPU worker seconds per UTC day. {_CLEAR}")] = None,
    usd_per_day: Annotated[float | None, typer.Option(
        help=f"LLM cost in USD per UTC day. {_CLEAR}")] = None,
) -> None:
    """Set a team's limits: checked when it submits (429) and before each dispatch."""
    given = {"concurrent_jobs": concurrent_jobs, "gpu_s_per_day": gpu_seconds_per_day,
             "usd_per_day": usd_per_day}
    changes = {k: (None if v < 0 else v) for k, v in given.items() if v is not None}
    if not changes:
        typer.echo("Nothing to set: give --concurrent-jobs, --gpu-seconds-per-day or "
                   "--usd-per-day.", err=True)
        raise typer.Exit(2)
    with session_scope(configured_database()) as session:
        owner = repository.get_or_create_team(session, team)
        usage.set_quotas(session, owner.id, **changes)
        shown = usage.team_quotas(session, owner.id)
    typer.echo(f"Team '{team}': " + ", ".join(f"{k}={'none' if v is None else f'{v:g}'}"
                                              for k, v in shown.items()))


@quotas_app.command("show")
def show(team: Annotated[str, typer.Argument(help="Team name.")]) -> None:
    """A team's limits and today's use against them."""
    with session_scope(configured_database()) as session:
        owner = repository.get_or_create_team(session, team)
        quotas = usage.team_quotas(session, owner.id)
        over = usage.teams_over_quota(session).get(owner.id)
    typer.echo(", ".join(f"{k}={'none' if v is None else f'{v:g}'}" for k, v in quotas.items()))
    typer.echo(over.message() if over else "Within its daily quotas.")


def register(app: typer.Typer) -> None:
    """Add the `quotas` group to the CLI."""
    app.add_typer(quotas_app, name="quotas")
