"""The `kernelband` command lists its sub-commands without importing them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelband.cli import COMMANDS, app, load_command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    assert load_command(name).get_short_help_str(limit=500) == COMMANDS[name][1]


def test_help_lists_every_command_and_imports_none() -> None:
    script = ("import sys\nfrom kernelband.cli import main\nsys.argv = ['kernelband', '--help']\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "loaded = [m for m in sys.modules if m.startswith('kernelband.commands.')"
              " or m == 'torch']\nprint('LOADED', loaded)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, env={"COLUMNS": "200", "PATH": ""})
    assert "LOADED []" in done.stdout
    for name in COMMANDS:
        assert name in done.stdout


def test_a_command_runs_and_a_typo_is_answered() -> None:
    result = CliRunner().invoke(app, ["quotas", "--help"])
    assert result.exit_code == 0 and "Set and show per-team quotas." in result.output
    typo = CliRunner().invoke(app, ["chek"])
    assert typo.exit_code == 2 and "Did you mean 'check'?" in typo.output
