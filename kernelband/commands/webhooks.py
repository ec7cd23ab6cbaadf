"""`kernelband webhooks deliver`: the process that sends teams' webhook deliveries."""

from __future__ import annotations

import logging
from typing import Annotated

import httpx
import typer

from kernelband import webhooks
from kernelband.commands.tokens import configured_database
from kernelband.config import get_settings

webhooks_app = typer.Typer(no_args_is_help=True, help="Team webhooks.")


@webhooks_app.command("deliver")
def deliver(
    once: Annotated[bool, typer.Option(help="One pass, then exit (cron, tests).")] = False,
    interval_s: Annotated[float, typer.Option(min=0.05, help="Seconds between passes.")] = 1.0,
    backoff_s: Annotated[float, typer.Option(
        min=0.01, help="First retry delay of a failed delivery; doubles each try.")] = 5.0,
) -> None:
    """Read new events, send the deliveries hooks asked for, retry failures with backoff.

    Needs KERNELBAND_DATABASE_URL (the API's database); run one per deployment, beside the
    scheduler. KERNELBAND_WEBHOOK_MAX_TRIES and KERNELBAND_WEBHOOK_TIMEOUT_S apply."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = get_settings()
    factory = configured_database()
    max_tries, timeout_s = settings.webhook_max_tries, settings.webhook_timeout_s
    if once:
        with httpx.Client(timeout=timeout_s) as client:
            tries = webhooks.deliver_once(factory, client, max_tries=max_tries, base_s=backoff_s,
                                          timeout_s=timeout_s)
        typer.echo(f"{tries} delivery tries made.")
        return
    typer.echo("Delivering webhooks (Ctrl-C to stop).", err=True)
    webhooks.deliver_forever(factory, max_tries=max_tries, base_s=backoff_s,
                             timeout_s=timeout_s, interval_s=interval_s)


def register(app: typer.Typer) -> None:
    """Add the `webhooks` group to the CLI."""
    app.add_typer(webhooks_app, name="webhooks")
