"""The `kernelband` command. Each sub-command lives in `kernelband/commands/<module>.py`, exposes
`register(app)`, and is imported only when it runs or shows its own help."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import typer
import typer.main
from typer import _click as click  # Typer vendors click: its groups take these types
from typer.core import TyperCommand, TyperGroup

# name -> (module in kernelband.commands, the line `kernelband --help` shows without importing it)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("check", "Check the original kernel (or --candidate) against the reference, in the "
                       "sandbox."),
    "profile": ("profile", "Profile the kernel of FILE for a GPU type without a GPU (static "
                           "profile + estimate)."),
    "generate": ("generate", "Rewrite the problem's kernel once with one strategy and print the "
                             "unified diff."),
    "fake-llm": ("fake_llm", "Serve POST /v1/chat/completions and GET /v1/models from canned "
                             "replies (simulated usage)."),
    "bench-policies": ("bench_policies", "Compare bandit policies on SIMULATED reward landscapes "
                                         "(and a replay table)."),
    "optimize": ("optimize", "Optimize FILE's kernel with the bandit search and write the best "
                             "verified version."),
    "serve": ("serve", "Serve the REST API with the embedded scheduler (SQLite under the data dir "
                       "by default)."),
    "tokens": ("tokens", "Create, revoke and list team API tokens."),
    "quotas": ("quotas", "Set and show per-team quotas."),
    "webhooks": ("webhooks", "Team webhooks."),
    "report": ("report", "Write job<ID>.html (charts and tables inlined) and job<ID>-speedup.png."),
    "suite": ("suite", "Optimize every problem in DIRECTORY, one job per (problem, policy), and "
                       "report suite metrics."),
    "doctor": ("doctor", "Check this node: device, sandbox, Nsight Compute, broker and database."),
    "migrate": ("migrate", "Run the bundled Alembic migrations up to head; safe to run again."),
}
_LISTING = "kernelband.listing"  # ctx.meta key: the group's help is being written


def load_command(name: str) -> click.Command:
    """Import the sub-command `name` and build it as Typer would inside one app."""
    module = importlib.import_module(f"kernelband.commands.{COMMANDS[name][0]}")
    commands = typer.Typer()
    module.register(commands)
    return typer.main.get_group(commands).commands[name]


class LazyCommands(TyperGroup):
    """Lists COMMANDS from the table and imports a sub-command's module only to run it: the
    modules load torch, the judge and the database, which `kernelband --help` needs none of."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # placeholders for the listing and for "Did you mean ...?"; a module missing from this
        # build is left out
        self.commands = {
            name: TyperCommand(name, help=text) for name, (module, text) in COMMANDS.items()
            if importlib.util.find_spec(f"kernelband.commands.{module}") is not None}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands or ctx.meta.get(_LISTING):
            return super().get_command(ctx, cmd_name)
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        ctx.meta[_LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            ctx.meta.pop(_LISTING, None)


app = typer.Typer(cls=LazyCommands, no_args_is_help=True, add_completion=False,
                  help="KernelBand: faster Triton kernels.")


@app.callback()
def _group() -> None:
    """Without a callback or a registered command, Typer would build no group at all."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
