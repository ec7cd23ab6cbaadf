"""`kernelband check`: exit 0 correct, 1 rejected, 2 not loadable; --json prints the verdict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelband.commands.check import register
from kernelband.sandbox import shutdown_pool

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "vector_add.py"
ADVERSARIAL = ROOT / "tests" / "unit" / "evaluate" / "adversarial"


@pytest.fixture(scope="module")
def app() -> Iterator[typer.Typer]:
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `check` a named sub-command
    yield app
    shutdown_pool()


def test_original_kernel_is_correct(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["check", str(EXAMPLE), "--json", "--seeds", "1"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.output)
    assert verdict["correct"] is True and verdict["held_out_checked"] == 2


def test_rejected_candidate_exits_1_with_reason(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["check", str(EXAMPLE), "--candidate", str(ADVERSARIAL / "torch_decoy.py")])
    assert result.exit_code == 1, result.output
    assert "REJECTED" in result.output and "decoy_no_triton_launch" in result.output


def test_unloadable_problem_exits_2_with_loader_reason(app: typer.Typer, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nCASES = [\n")
    result = CliRunner().invoke(app, ["check", str(broken), "--json"])
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["loaded"] is False and "line" in payload["reason"]


def test_missing_candidate_file_exits_2(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["check", str(EXAMPLE), "--candidate", str(tmp_path / "nope.py")])
    assert result.exit_code == 2


PUBLISHED_KERNELBENCH = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 4
dim = 40


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_published_kernelbench_file_checks_model_and_says_it_needs_translation(
        app: typer.Typer, tmp_path: Path) -> None:
    path = tmp_path / "relu.py"
    path.write_text(PUBLISHED_KERNELBENCH)
    args = ["check", str(path), "--format", "kernelbench", "--seeds", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "CORRECT relu (the PyTorch Model; no Triton yet)" in text
    assert "needs translation" in text and "--model" in text
    verdict = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    assert verdict["correct"] is True and verdict["needs_translation"] is True
