"""`kernelband report JOB`: one self-contained HTML report plus PNG charts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernelband.config import get_settings
from kernelband.report import ReportError, from_server, write_job_report, write_report


def report(
    job: Annotated[str, typer.Argument(help="Job id: job_... (as the API shows it), or the row "
                                            "number in a local database.")],
    out: Annotated[Path, typer.Option(help="Directory for the HTML and PNG files.")] = Path("reports"),
    server: Annotated[str | None, typer.Option(help="Read the job from this service URL.")] = None,
    token: Annotated[str | None, typer.Option(help="Team token for --server.", envvar="KERNELBAND_TOKEN")] = None,
) -> None:
    """Write job<ID>.html (charts and tables inlined) and job<ID>-speedup.png."""
    try:
        if server:
            if not token:
                raise ReportError("--server needs --token (or KERNELBAND_TOKEN): a team token "
                                  "from `kernelband tokens create --team NAME`")
            files = write_report(from_server(server, token, job), out)
        else:
            files = write_job_report(get_settings().effective_database_url, job, out)
    except ReportError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(f"report written to {files.html}")
    for png in files.pngs:
        typer.echo(f"chart written to {png}")


def register(app: typer.Typer) -> None:
    """Add `report` to the CLI."""
    app.command("report")(report)
