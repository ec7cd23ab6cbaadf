"""The `kernelband` command. Each sub-command lives in `kernelband/commands/<name>.py` and
exposes `register(app)`."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="KernelBand: faster Triton kernels.")

# One module per command group; each defines `register(app: typer.Typer) -> None`.
COMMAND_MODULES = (
    "check",
    "profile",
    "generate",
    "fake_llm",
    "bench_policies",
    "optimize",
    "serve",
    "tokens",
    "quotas",
    "webhooks",
    "report",
    "suite",
    "doctor",
    "migrate",
)


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"kernelband.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"kernelband.commands.{name}":
                continue  # command not installed in this build
            raise
        module.register(app)


def main() -> None:
    _register_commands()
    app()


if __name__ == "__main__":
    main()
