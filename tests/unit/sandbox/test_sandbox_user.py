"""KERNELBAND_SANDBOX_USER: a root service runs its sandbox children as an unprivileged user
(outside the jail: setuid after fork; in the jail: the jail's uid, kernelband/sandbox/jail.py)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelband.sandbox import SandboxLimits, jail, run_sandboxed, runner, shutdown_pool
from kernelband.sandbox.limits import default_triton_cache_dir
from kernelband.sandbox.privileges import SandboxUserError, _own_dir, probe_paths, user_problem

PROBE = "kernelband.sandbox.privileges:unreadable_paths"  # imported before the drop, on both paths
NOBODY = pwd.getpwnam("nobody")
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


@pytest.fixture(autouse=True)
def _checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Count `nobody` as checked: this machine's Python may live where nobody cannot read."""
    monkeypatch.setattr(runner, "_user_checks", {"nobody": ""})
    yield
    shutdown_pool()


@pytest.mark.parametrize("warm", [True, False])
def test_children_run_as_the_user_with_no_groups_and_a_cache_of_their_own(warm: bool) -> None:
    limits = SandboxLimits(user="nobody", warm=warm, isolation="unjailed")
    result = run_sandboxed(PROBE, {"paths": []}, limits)
    assert result.ok, result.message + result.stderr_tail
    assert (result.value["uid"], result.value["gid"]) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert result.value["groups"] == []
    cache = os.lstat(f"{default_triton_cache_dir()}-{NOBODY.pw_uid}")
    assert cache.st_uid == NOBODY.pw_uid and oct(cache.st_mode & 0o777) == "0o700"


def test_a_child_as_the_user_cannot_read_roots_private_files(tmp_path: Path) -> None:
    secret = tmp_path / "private" / "key.txt"
    secret.parent.mkdir(mode=0o700)
    secret.write_text("root only")
    limits = SandboxLimits(user="nobody", isolation="unjailed")
    as_root = run_sandboxed(PROBE, {"paths": [str(secret)]}, SandboxLimits(isolation="unjailed"))
    as_nobody = run_sandboxed(PROBE, {"paths": [str(secret)]}, limits)
    assert as_root.ok and as_root.value["unreadable"] == []
    assert as_nobody.ok and as_nobody.value["unreadable"] == [f"{secret} (Permission denied)"]
    problem = user_problem("nobody", True, as_nobody.value, "")
    assert "cannot read" in problem and str(secret) in problem and "unset" in problem


def test_an_unknown_user_is_refused_before_any_child_starts() -> None:
    with pytest.raises(SandboxUserError, match="no such user"):
        run_sandboxed(PROBE, {"paths": []}, SandboxLimits(user="kb-no-such-user"))


def test_a_link_planted_at_the_cache_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache-65534").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError, match="not a directory owned by root"):
        _own_dir(str(tmp_path / "cache-65534"), NOBODY.pw_uid, NOBODY.pw_gid)
    assert os.stat(tmp_path / "elsewhere").st_uid == 0  # nothing was given away


@pytest.mark.parametrize("warm", [True, False])
def test_in_the_jail_the_user_reads_the_runtime_even_under_root(warm: bool) -> None:
    if jail.jail_problem():
        pytest.skip(f"bwrap cannot run here: {jail.jail_problem()}")
    limits = SandboxLimits(user="nobody", warm=warm, isolation="jail")
    result = run_sandboxed(PROBE, {"paths": probe_paths()}, limits)
    assert result.ok, result.message + result.stderr_tail
    assert (result.value["uid"], result.value["gid"]) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert result.value["unreadable"] == []  # the interpreter lives under /root on this machine
