"""The sandbox-limit options `check`, `optimize` and `suite` share (a job's `limits`)."""

from __future__ import annotations

from typing import Annotated

import typer

RunLimit = Annotated[float | None, typer.Option(
    "--run-limit", min=0.001, help="Seconds one sandboxed run may take, compilation aside "
    "(default: KERNELBAND_SANDBOX_TIMEOUT_S, 60; 120 in the CPU interpreter).")]
CompileLimit = Annotated[float | None, typer.Option(
    "--compile-limit", min=0.001, help="Seconds of Triton compilation and autotuning per "
    "sandboxed run (default: KERNELBAND_SANDBOX_COMPILE_S, 240).")]
ConfigCompileLimit = Annotated[float | None, typer.Option(
    "--config-compile-limit", min=0, help="An autotune config still compiling after this many "
    "seconds is left out of its tuning round; 0 waits for every config (default: "
    "KERNELBAND_SANDBOX_CONFIG_COMPILE_S, 120).")]


def limits_given(run: float | None, compile: float | None,  # noqa: A002 - the option's name
                 config_compile: float | None) -> dict[str, float]:
    """The limits set on the command line, by their job names (kernelband.sandbox.JOB_LIMITS)."""
    given = {"run_s": run, "compile_s": compile, "config_compile_s": config_compile}
    return {name: float(value) for name, value in given.items() if value is not None}
