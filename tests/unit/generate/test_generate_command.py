"""`kernelband generate` prints the unified diff of one rules rewrite."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from kernelband.commands import generate as generate_command

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add.py"


def _app() -> typer.Typer:
    app = typer.Typer()
    generate_command.register(app)
    app.command("noop")(lambda: None)  # two commands keep typer from collapsing to one
    return app


def test_generate_prints_a_diff_with_the_rules_generator(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KERNELBAND_LLM_MODEL", "")
    from kernelband.config import get_settings
    get_settings.cache_clear()
    result = CliRunner().invoke(_app(), ["generate", str(EXAMPLE), "--strategy", "reordering", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "--- vector_add.py (parent)" in result.stdout and "num_warps" in result.stdout


def test_unknown_strategy_is_refused_with_the_valid_names() -> None:
    result = CliRunner().invoke(_app(), ["generate", str(EXAMPLE), "--strategy", "magic"])
    assert result.exit_code == 2 and "choose one of" in result.output
