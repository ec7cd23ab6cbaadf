"""The sandbox confines, limits and reports real child processes (warm and cold)."""

from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Iterator

import pytest

from kernelband.sandbox import SandboxLimits, run_sandboxed, shutdown_pool
from kernelband.sandbox.child import _CLONE_NEWNET, _CLONE_NEWUSER, _loopback_up
from kernelband.sandbox.limits import SandboxResult
from kernelband.sandbox.probes import connect, loopback_roundtrip

PROBE = "kernelband.sandbox.probes:"
FAST = {"wall_s": 3.0, "cpu_s": 3, "memory_bytes": 1500 * 1024**2, "max_procs": 20}


@pytest.fixture(scope="module", autouse=True)
def _pool() -> Iterator[None]:
    yield
    shutdown_pool()


def run(target: str, payload: dict, **limits: object) -> SandboxResult:
    return run_sandboxed(PROBE + target, payload, SandboxLimits(**{**FAST, **limits}))  # type: ignore[arg-type]


@pytest.mark.parametrize("warm", [True, False])
def test_child_gets_private_dir_own_session_and_scrubbed_env(warm: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "sk-secret")
    monkeypatch.setenv("DATABASE_URL", "postgresql://root@127.0.0.1/x")
    monkeypatch.setenv("MY_TOKEN", "t")
    result = run("echo", {"x": [1, 2]}, warm=warm, interpret=True)
    assert result.ok, result
    value = result.value
    assert value["payload"] == {"x": [1, 2]}
    assert value["sid_is_pid"] is True or value["sid"] == 0  # 0: led from outside the jail's pids
    assert value["torch_loaded"] is warm
    assert value["env"]["TRITON_INTERPRET"] == "1"
    assert value["env"]["TRITON_CACHE_AUTOTUNING"] == "1"  # one autotune choice per kernel source
    assert value["env"]["HOME"] == value["cwd"]
    assert not any(k in value["env"] for k in ("KERNELBAND_LLM_API_KEY", "DATABASE_URL", "MY_TOKEN"))
    assert not os.path.exists(value["cwd"]), "the temp dir must be deleted afterwards"
    assert result.warm is warm


@pytest.mark.parametrize(
    ("target", "payload", "limits", "reason"),
    [
        ("sleep", {"seconds": 60}, {"wall_s": 1.0}, "timeout"),
        ("segfault", {}, {}, "crashed:SIGSEGV"),
        ("exit_now", {"code": 3}, {}, "exit:3"),
        # the memory limit must win even when a busy host stalls the child's first page
        # touches for seconds (seen in full-suite runs, once as 3 s of CPU time on a slow
        # host): give neither clock a chance
        ("allocate", {"gb": 20}, {"memory_bytes": 1024**3, "wall_s": 7.0, "cpu_s": 7},
         "memory_limit"),
        ("fork_many", {"n": 200}, {"audit": False, "max_procs": 10}, "too_many_processes"),
        ("spin", {}, {"cpu_s": 1, "wall_s": 10}, "cpu_limit"),
        ("write_file", {"path": "/tmp/kb_sandbox_escape"}, {}, "exception:SandboxViolation"),
    ],
)
def test_misbehaving_child_is_a_result_not_an_outage(target: str, payload: dict, limits: dict, reason: str) -> None:
    result = run(target, payload, **limits)
    assert not result.ok
    assert result.reason == reason, result
    assert result.wall_s < 20  # ended by its limit, well before any outer timeout
    assert not os.path.exists("/tmp/kb_sandbox_escape")


def test_network_namespace_has_no_route_even_without_audit_hook() -> None:
    result = run("connect", {"host": "127.0.0.1", "port": 6379}, audit=False)
    assert result.ok, result
    assert result.network_isolated is True
    assert result.value["connected"] is False


def test_profiled_child_has_its_own_loopback_and_still_no_route_out() -> None:
    # What an ncu attach session inside the child's namespace needs: 127.0.0.1 works there...
    result = run("loopback_roundtrip", {}, audit=False, profiled=True, warm=False)
    assert result.ok and result.network_isolated is True, result
    assert result.value == {"reachable": True}
    # ... but it is a private loopback: the host's services (Redis here) stay out of reach.
    outside = run("connect", {"host": "127.0.0.1", "port": 6379}, audit=False, profiled=True)
    assert outside.ok and outside.network_isolated is True and outside.value["connected"] is False
    plain = run("loopback_roundtrip", {}, audit=False, warm=True)
    assert plain.value["reachable"] is False  # without `profiled`, not even loopback


def test_loopback_also_comes_up_in_a_user_namespace() -> None:
    # A worker that is not root isolates its children with a user + network namespace; bringing
    # loopback up there rests on the capabilities the new user namespace grants.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        libc = ctypes.CDLL(None, use_errno=True)
        unshared = libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0
        seen = {"unshared": unshared, "up": unshared and _loopback_up(),
                "loopback": loopback_roundtrip({}), "redis": connect({"host": "127.0.0.1", "port": 6379})}
        os.write(write, json.dumps(seen).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        seen = json.loads(f.read())
    os.waitpid(pid, 0)
    assert seen["unshared"] and seen["up"], seen
    assert seen["loopback"] == {"reachable": True} and seen["redis"]["connected"] is False


def test_audit_hook_refuses_sockets() -> None:
    result = run("connect", {"host": "127.0.0.1", "port": 6379})
    assert result.value == {"connected": False, "error": "SandboxViolation"}


def test_exception_in_target_comes_back_with_type_and_message() -> None:
    result = run_sandboxed("kernelband.sandbox.probes:does_not_exist", {}, SandboxLimits(**FAST))  # type: ignore[arg-type]
    assert not result.ok
    assert result.reason == "exception:AttributeError"
    assert "does_not_exist" in result.message


def test_a_child_may_stop_a_tool_it_started_but_no_other_process() -> None:
    own = run("stop_compiler", {})
    assert own.ok and own.value["killed"] is True, own
    other = run("stop_compiler", {"parent": True})
    assert other.value == {"killed": False, "error": "SandboxViolation"}, other
