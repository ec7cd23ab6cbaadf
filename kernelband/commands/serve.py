"""`kernelband serve`: the API, the scheduler loop and local workers in one process."""

from __future__ import annotations

from typing import Annotated

import typer
import uvicorn

from kernelband.config import get_settings
from kernelband.db import open_database
from services.api.app import create_app
from services.api.embedded import EmbeddedScheduler, register_bootstrap_token


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option(min=1, max=64, help="In-process task threads.")] = 2,
    scheduler: Annotated[bool, typer.Option(help="Run the embedded scheduler loop.")] = True,
) -> None:
    """Serve the REST API with the embedded scheduler (SQLite under the data dir by default)."""
    settings = get_settings()
    url = settings.effective_database_url
    _, factory = open_database(url, migrate=url.startswith("sqlite"))
    if settings.bootstrap_token.get_secret_value():
        register_bootstrap_token(factory, settings.bootstrap_token.get_secret_value(), "default")
    loop = EmbeddedScheduler(factory, settings, workers) if scheduler else None
    app = create_app(settings, session_factory=factory, embedded=True,
                     local_workers=loop.describe if loop else None)
    typer.echo(f"KernelBand API on http://{host}:{port} (database {url.split('@')[-1]}); "
               "create a token with `kernelband tokens create --team NAME`")
    if loop is not None:
        loop.start()
    try:
        uvicorn.run(app, host=host, port=port, log_level="info")
    finally:
        if loop is not None:
            loop.stop()


def register(app: typer.Typer) -> None:
    """Add `serve` to the CLI."""
    app.command("serve")(serve)
