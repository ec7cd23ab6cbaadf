"""Isolation levels: a node that cannot jail refuses submitted code unless weaker isolation is
accepted explicitly, says which level it runs at, and `kernelband doctor` flags root."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelband.commands import doctor
from kernelband.config import get_settings
from kernelband.sandbox import SandboxLimits, jail, run_sandboxed, shutdown_pool

ECHO = "kernelband.sandbox.probes:echo"


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Settings read afresh from the environment this test sets; restored afterwards."""
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()
    shutdown_pool()


def _cannot_jail(node: pytest.MonkeyPatch) -> None:
    node.setattr(jail, "jail_problem", lambda: "no bwrap binary (stood in for by this test)")


def test_a_node_that_cannot_jail_refuses_submitted_code_and_says_what_to_do(
        node: pytest.MonkeyPatch) -> None:
    _cannot_jail(node)
    node.setenv("KERNELBAND_SANDBOX_ISOLATION", "jail")
    with pytest.raises(jail.SandboxJailError, match="KERNELBAND_SANDBOX_ISOLATION=weak"):
        run_sandboxed(ECHO, {}, SandboxLimits.from_settings(interpret=True))
    assert jail.isolation_level() == "refused:no-jail"
    finding = doctor.check_sandbox()
    assert not finding.ok and "refused:no-jail" in finding.detail and "bwrap" in finding.advice


def test_accepted_weak_isolation_runs_and_doctor_flags_root(node: pytest.MonkeyPatch) -> None:
    _cannot_jail(node)
    node.setenv("KERNELBAND_SANDBOX_ISOLATION", "weak")
    node.delenv("KERNELBAND_SANDBOX_USER", raising=False)
    result = run_sandboxed(ECHO, {}, SandboxLimits.from_settings(interpret=True, warm=False))
    assert result.ok, result.message
    assert not result.value["cwd"].startswith(jail.runs_parent())  # an unjailed work dir
    expected = "none:root" if jail.os.geteuid() == 0 else "weak:user"
    assert jail.isolation_level() == expected
    assert jail.describe_isolation().startswith(f"{expected}: not jailed (no bwrap binary")
    finding = doctor.check_sandbox()
    if expected == "none:root":
        assert not finding.ok and "AS ROOT" in finding.detail
        assert "KERNELBAND_SANDBOX_USER=nobody" in finding.advice


def test_weak_with_a_sandbox_user_is_named_setuid(node: pytest.MonkeyPatch) -> None:
    _cannot_jail(node)
    node.setenv("KERNELBAND_SANDBOX_ISOLATION", "weak")
    node.setenv("KERNELBAND_SANDBOX_USER", "nobody")
    expected = "weak:setuid" if jail.os.geteuid() == 0 else "weak:user"
    assert jail.isolation_level() == expected


def test_a_node_that_can_jail_runs_jailed_at_either_setting(node: pytest.MonkeyPatch) -> None:
    if jail.jail_problem():
        pytest.skip(f"bwrap cannot run here: {jail.jail_problem()}")
    for setting in ("jail", "weak"):
        node.setenv("KERNELBAND_SANDBOX_ISOLATION", setting)
        get_settings.cache_clear()
        assert jail.isolation_level() == "jail:bwrap"
        result = run_sandboxed(ECHO, {}, SandboxLimits.from_settings(interpret=True))
        assert result.ok and result.value["cwd"].startswith(jail.runs_parent()), result
    finding = doctor.check_sandbox()
    assert finding.ok and "jailed as uid" in finding.detail and "jail:bwrap" in finding.detail


def test_an_unknown_setting_is_refused_with_the_known_ones(node: pytest.MonkeyPatch) -> None:
    node.setenv("KERNELBAND_SANDBOX_ISOLATION", "strict")
    with pytest.raises(jail.SandboxJailError, match="`jail` .* `weak` .* `unjailed`"):
        run_sandboxed(ECHO, {}, SandboxLimits.from_settings(interpret=True))
    assert jail.isolation_level() == "refused:no-jail"
