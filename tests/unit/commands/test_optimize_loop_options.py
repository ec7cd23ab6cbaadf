"""`kernelband optimize --repair-turns N --no-dedupe` reach the job; bad values are explained."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelband.scheduling.embedded import JobOptions, job_columns


def test_loop_options_become_job_columns() -> None:
    columns = job_columns(JobOptions(repair_turns=2, dedupe=False))
    assert columns["repair_turns"] == 2 and columns["dedupe"] is False
    assert job_columns(JobOptions())["repair_turns"] == 1


def test_out_of_range_repair_turns_are_refused(tmp_path: Path) -> None:
    from kernelband.commands import optimize

    app = typer.Typer()
    optimize.register(app)
    app.command("noop")(lambda: None)  # typer needs two commands to keep the name
    result = CliRunner().invoke(app, ["optimize", str(tmp_path), "--repair-turns", "9"])
    assert result.exit_code == 2 and "between 0 and 5" in " ".join(result.output.split())


def test_published_kernelbench_file_is_refused_without_a_model(tmp_path: Path) -> None:
    from kernelband.commands import optimize

    path = tmp_path / "relu.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(4, 4)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    app = typer.Typer()
    optimize.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["optimize", str(path), "--format", "kernelbench"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "is refused" in text
    assert "only an LLM generator can do" in text and "--model" in text


def test_limit_options_become_the_jobs_limits() -> None:
    from kernelband.commands.limit_options import limits_given

    assert limits_given(None, 900, 0) == {"compile_s": 900.0, "config_compile_s": 0.0}
    assert limits_given(None, None, None) == {}
    assert job_columns(JobOptions(limits={"run_s": 30.0}))["limits"] == {"run_s": 30.0}


def test_a_check_runs_under_the_limits_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.commands import check
    from kernelband.sandbox import SandboxLimits

    seen: list[SandboxLimits] = []

    def fake_check(*args: object) -> None:
        seen.append(SandboxLimits.from_settings())

    monkeypatch.setattr(check, "_check", fake_check)
    app = typer.Typer()
    check.register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["check", str(tmp_path / "f.py"), "--compile-limit", "700",
                                      "--run-limit", "9", "--config-compile-limit", "0"])
    assert result.exit_code == 0, result.output
    assert (seen[0].compile_s, seen[0].wall_s, seen[0].config_compile_s) == (700.0, 9.0, 0.0)
