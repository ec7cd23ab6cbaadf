"""`kernelband fake-llm DIR [--port P]`: serve canned LLM replies (an OpenAI-compatible stand-in)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from kernelband.generate.fake_server import create_app
from kernelband.generate.replay import ReplayScript


def fake_llm(
    directory: Annotated[Path | None, typer.Argument(
        help="Script directory: DIR/<problem>/<strategy>.md|.json.")] = None,
    replay: Annotated[Path | None, typer.Option(
        help="Serve a job's recorded replies: the JSON of GET /v1/jobs/{id}/transcripts.")] = None,
    port: Annotated[int, typer.Option(help="Port to listen on (127.0.0.1).")] = 8089,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
) -> None:
    """Serve POST /v1/chat/completions and GET /v1/models from canned replies (simulated usage)."""
    if replay is not None:
        try:
            script = ReplayScript(replay)
        except ValueError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
        typer.echo(f"replaying {script.recorded} recorded replies from {replay} on "
                   f"http://{host}:{port}/v1", err=True)
        uvicorn.run(create_app(script=script), host=host, port=port, log_level="warning")
        return
    if directory is None or not directory.is_dir():
        typer.echo(f"{directory} is not a directory: create DIR/<problem>/<strategy>.md first, "
                   "or pass --replay JOB_EXPORT", err=True)
        raise typer.Exit(2)
    typer.echo(f"scripted LLM on http://{host}:{port}/v1 (model 'openai/<any>', replies from {directory})", err=True)
    uvicorn.run(create_app(directory), host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    app.command("fake-llm")(fake_llm)
