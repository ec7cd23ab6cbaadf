"""`--param NAME=VALUE`: policy parameters from the command line, checked before a job starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelband.commands import optimize
from kernelband.commands.policy_params import parse_policy_params

ROOT = Path(__file__).resolve().parents[3]


def test_values_are_json_when_they_parse_and_text_otherwise() -> None:
    params = parse_policy_params(
        ["c=1.5", "k=1", "parent_rule=fastest", 'theta_sat={"dram": 60}', "signatures=representatives"],
        "kernelband")
    assert params == {"c": 1.5, "k": 1, "parent_rule": "fastest", "theta_sat": {"dram": 60},
                      "signatures": "representatives"}
    assert parse_policy_params(None, "ucb1") == {}


@pytest.mark.parametrize(("items", "policy", "message"), [
    (["c"], "kernelband", "is not NAME=VALUE"),
    (["=3"], "kernelband", "is not NAME=VALUE"),
    (["c=1", "c=2"], "kernelband", "given twice"),
    (["temperature=2"], "ucb1", "unknown parameter(s) ['temperature'] for policy 'ucb1'"),
    (["c=-1"], "kernelband", "c must be > 0"),
    (["parent_rule=best"], "kernelband", "parent_rule must be one of"),
])
def test_bad_parameters_say_what_to_change(items: list[str], policy: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_policy_params(items, policy)
    assert message in str(error.value)


def test_optimize_refuses_a_bad_param_before_running_anything() -> None:
    app = typer.Typer()
    optimize.register(app)
    app.command("noop")(lambda: None)  # typer needs two commands to keep the name
    result = CliRunner().invoke(app, ["optimize", str(ROOT / "examples" / "vector_add.py"),
                                      "--policy", "ucb1", "--param", "k=3"])
    text = " ".join(result.output.split())  # rich wraps to the terminal's width
    assert result.exit_code == 2
    assert "unknown parameter(s) ['k'] for policy 'ucb1'" in text and "allowed: c" in text


def test_optimize_options_carry_the_parameters_to_the_job() -> None:
    options = optimize._options(None, "kernelband", 4, "", 2, 0, None, None, None,
                                ["parent_rule=fastest", "k=1"])
    assert options.policy_params == {"parent_rule": "fastest", "k": 1}
