"""The Nsight Compute pass: warm (a forked run profiled by an attach session) and fresh.

No GPU and no Nsight Compute here: a stand-in `ncu` on PATH takes their place. It runs the
launched zygote as is, answers attach sessions with a profile (after failing the first ones when
asked, as ncu does while nothing waits yet) and records how it was called. What runs for real is
this project's side: the ncu-launched sandbox pool, the fork, the retry loop, the environment
the frontend gets, and h in the features.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from kernelband.config import get_settings
from kernelband.problem.loader import load_problem
from kernelband.profile import ncu_pass
from kernelband.profile.features import Features
from kernelband.profile.ncu_pass import LAUNCHED_ENV, NcuCase
from kernelband.profile.sandboxed import NCU_TARGET, _with_ncu_signature
from kernelband.sandbox import SandboxLimits, run_sandboxed, shutdown_pool
from kernelband.sandbox.pool import forks_warm

REPO = Path(__file__).resolve().parents[3]
CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","lts__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","","%","usecond","%","%"
"0","77","python3","127.0.0.1","add_kernel","81.5","12.5","40.25","12.75"
'''
FAKE_NCU = '''#!/bin/sh
here=$(dirname "$0")
case " $* " in
*" --mode=launch "*) shift 3; exec "$@" ;;
*" --mode=attach "*)
  n=$(cat "$here/attaches" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$here/attaches"
  env > "$here/attach-env"
  if [ "$n" -le "$(cat "$here/fail-first")" ]; then
    echo "==ERROR== An error occurred while trying to profile." >&2; exit 1
  fi
  cat "$here/sample.csv" ;;
*) echo "$@" > "$here/plain-args"; cat "$here/sample.csv" ;;
esac
'''
ESTIMATED = Features((0.1, 32.0, 0.0, 7.0, 100.0), ("driver",) + ("static",) * 4, (1.0, 2.0, 3.0),
                     ("estimate",) * 3)


@pytest.fixture(autouse=True)
def ncu_accepted_unjailed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """These tests run the pass itself: the operator accepted it outside the jail."""
    monkeypatch.setenv("KERNELBAND_NCU_UNJAILED", "true")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in first on PATH, failing no attach unless a test writes `fail-first`."""
    (tmp_path / "ncu").write_text(FAKE_NCU)
    (tmp_path / "ncu").chmod(0o755)
    (tmp_path / "sample.csv").write_text(CSV)
    (tmp_path / "fail-first").write_text("0")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    shutdown_pool()  # a profiled zygote started now uses this stand-in
    yield tmp_path
    shutdown_pool()


def _slow_problem_source() -> str:
    """vector_add whose inputs take a second: the forked run is still going when ncu attaches."""
    source = (REPO / "examples" / "vector_add.py").read_text()
    return source.replace("def make_inputs(case, device, seed):\n",
                          "def make_inputs(case, device, seed):\n    import time; time.sleep(1.0)\n")


def _pass_payload() -> dict[str, object]:
    problem = load_problem(_slow_problem_source(), "native", "vector_add_slow")
    return {"problem": problem.to_dict(), "editable": None,
            "case": NcuCase(0, ("add_kernel",)).to_dict(), "timeout_s": 60.0}


def test_attach_retries_until_the_waiting_run_is_profiled(
        fake_ncu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (fake_ncu / "fail-first").write_text("2")
    monkeypatch.setenv(LAUNCHED_ENV, "1")
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "sk-never-to-the-frontend")

    def waiting_run(run: dict[str, object]) -> None:  # stands in for a run stopped at CUDA init
        time.sleep(2.0)
        os._exit(0)

    monkeypatch.setattr(ncu_pass, "_grandchild", waiting_run)
    outcome = ncu_pass._attached({}, "^(add_kernel)$", timeout_s=30.0)
    assert outcome.ok, outcome
    assert outcome.kernels[0].metrics["dram_pct"] == 81.5
    assert (fake_ncu / "attaches").read_text().strip() == "3"
    frontend_env = (fake_ncu / "attach-env").read_text()
    assert LAUNCHED_ENV not in frontend_env and "sk-never" not in frontend_env


def test_attach_gives_up_when_the_run_ends_before_it_could_be_profiled(
        fake_ncu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (fake_ncu / "fail-first").write_text("1000")
    monkeypatch.chdir(fake_ncu)
    monkeypatch.setattr(ncu_pass, "_grandchild", _failing_run)
    start = time.monotonic()
    outcome = ncu_pass._attached({}, "^(k)$", timeout_s=30.0)
    assert not outcome.ok and outcome.reason == "not_attached", outcome
    assert "An error occurred" in outcome.message  # what ncu said
    assert "no module named candidate_xyz" in outcome.message  # and what the run said
    assert time.monotonic() - start < 20  # gave up when the run ended, not at the 30 s timeout


def _failing_run(run: dict[str, object]) -> None:
    with open(ncu_pass.RUN_LOG, "w") as log:
        log.write("ModuleNotFoundError: no module named candidate_xyz\n")
    os._exit(1)


def test_warm_pass_runs_in_the_ncu_launched_pool_and_sets_h(fake_ncu: Path) -> None:
    limits = SandboxLimits(wall_s=90.0, profiled=True, audit=False)
    result = run_sandboxed(NCU_TARGET, _pass_payload(), limits)
    assert result.ok and result.warm, result
    assert result.value["mode"] == "warm" and result.value["outcome"]["ok"], result.value
    assert result.network_isolated is True  # the attach session ran inside the child's namespace

    features = _with_ncu_signature(load_problem(_slow_problem_source(), "native", "v"), None,
                                   ESTIMATED, NcuCase(0, ("add_kernel",)).to_dict(), limits)
    assert features.h == (12.75, 81.5, 40.25) and features.h_sources == ("ncu",) * 3
    assert features.phi == ESTIMATED.phi and features.phi_sources == ESTIMATED.phi_sources


def test_without_the_warm_pool_a_fresh_interpreter_is_profiled(fake_ncu: Path) -> None:
    limits = SandboxLimits(wall_s=90.0, profiled=True, audit=False, warm=False)
    result = run_sandboxed(NCU_TARGET, _pass_payload(), limits)
    assert result.ok and result.value["mode"] == "fresh" and result.value["outcome"]["ok"], result
    args = (fake_ncu / "plain-args").read_text()
    assert "--target-processes all" in args and "kernelband.profile.ncu_child" in args
    assert "regex:^(add_kernel)$" in args


def test_a_failed_pass_keeps_the_estimate(fake_ncu: Path) -> None:
    (fake_ncu / "sample.csv").write_text("==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    limits = SandboxLimits(wall_s=90.0, profiled=True, audit=False)
    features = _with_ncu_signature(load_problem(_slow_problem_source(), "native", "v"), None,
                                   ESTIMATED, NcuCase(0, ("add_kernel",)).to_dict(), limits)
    assert features.h == ESTIMATED.h and features.h_sources == ("estimate",) * 3
    assert features.h_note.startswith("ncu permission:") and "NVreg_" in features.h_note
    assert Features.from_dict(features.to_dict()) == features  # the note is stored with h


def test_without_ncu_no_pass_is_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kernelband.profile.ncu.find_ncu", lambda: None)
    monkeypatch.setattr("kernelband.profile.sandboxed._run", _never_called)
    features = _with_ncu_signature(load_problem(_slow_problem_source(), "native", "v"), None,
                                   ESTIMATED, NcuCase(0, ("add_kernel",)).to_dict(), None)
    assert features.h == ESTIMATED.h and "ncu not found" in features.h_note


def _never_called(*args: object) -> None:
    raise AssertionError("no sandboxed run was expected")


def test_an_ncu_that_cannot_launch_is_tried_once_then_the_fresh_pass_runs(fake_ncu: Path) -> None:
    script = (fake_ncu / "ncu").read_text()
    (fake_ncu / "ncu").write_text(script.replace('shift 3; exec "$@" ;;',
                                                 'echo x >> "$here/launches"; exit 7 ;;'))
    limits = SandboxLimits(wall_s=90.0, profiled=True, audit=False)
    modes, walls = [], []
    for _ in range(2):
        start = time.monotonic()
        result = run_sandboxed(NCU_TARGET, _pass_payload(), limits)
        walls.append(time.monotonic() - start)
        assert result.ok and not result.warm, result
        modes.append(result.value["mode"])
    assert modes == ["fresh", "fresh"]
    assert (fake_ncu / "launches").read_text().count("x") == 1  # not tried again
    assert max(walls) < 60  # the dead launcher is noticed, not waited out


def test_a_pass_that_changes_user_is_never_forked_from_the_ncu_launched_zygote() -> None:
    profiled = SandboxLimits(profiled=True, audit=False)
    assert forks_warm(profiled) and forks_warm(replace(profiled, profiled=False, user="nobody"))
    assert forks_warm(replace(profiled, user="nobody")) is (os.geteuid() != 0)
    assert not forks_warm(replace(profiled, warm=False))


def test_a_policy_that_does_not_read_h_gets_the_estimate_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import sandboxed
    from kernelband.profile.measurement import Measurement

    measured = Measurement("measured", "cuda events", "NVIDIA H100", "h100", 1.0, {"a": 1.0})
    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(sandboxed, "_run", lambda *args: {
        "measurement": measured.to_dict(), "features": ESTIMATED.to_dict(),
        "ncu_case": NcuCase(0, ("add_kernel",)).to_dict()})
    problem = load_problem(_slow_problem_source(), "native", "v")
    _, features = sandboxed.measure_candidate(problem, None, "h100", hardware_signature=False,
                                             paired=False)
    assert features.h == ESTIMATED.h and "does not read h" in features.h_note


def test_the_pass_reports_its_own_seconds_and_h(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import sandboxed
    from kernelband.profile.measurement import Measurement
    from kernelband.profile.ncu import NcuKernel, NcuOutcome

    measured = Measurement("measured", "cuda events", "NVIDIA H100", "h100", 1.0, {"a": 1.0})
    profiled = NcuOutcome(True, [NcuKernel("add_kernel", {"sm_pct": 5.0, "dram_pct": 91.0,
                                                          "l2_pct": 33.0, "time_ms": 0.01})])

    def sandboxed_run(target: str, *args: object) -> dict[str, object]:
        if target == NCU_TARGET:
            time.sleep(0.2)
            return {"outcome": profiled.to_dict(), "mode": "warm", "seconds": 0.2}
        return {"measurement": measured.to_dict(), "features": ESTIMATED.to_dict(),
                "ncu_case": NcuCase(0, ("add_kernel",)).to_dict()}

    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(sandboxed, "_run", sandboxed_run)
    monkeypatch.setattr("kernelband.profile.ncu.find_ncu", lambda: "/opt/ncu")
    timings: dict[str, float] = {}
    problem = load_problem(_slow_problem_source(), "native", "v")
    _, features = sandboxed.measure_candidate(problem, None, "h100", timings=timings, paired=False)
    assert features.h == (5.0, 91.0, 33.0) and features.h_sources == ("ncu",) * 3
    assert timings["signature"] >= 0.2


def test_a_node_that_must_jail_runs_no_pass_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_NCU_UNJAILED", "false")
    monkeypatch.setenv("KERNELBAND_SANDBOX_ISOLATION", "jail")
    get_settings.cache_clear()
    monkeypatch.setattr("kernelband.profile.ncu.find_ncu", lambda: "/opt/ncu")
    monkeypatch.setattr("kernelband.profile.sandboxed._run", _never_called)
    features = _with_ncu_signature(load_problem(_slow_problem_source(), "native", "va"), None,
                                   ESTIMATED, NcuCase(0, ("add_kernel",)).to_dict(), None)
    assert features.h == ESTIMATED.h and features.h_sources == ("estimate",) * 3
    assert "outside the jail" in features.h_note and "KERNELBAND_NCU_UNJAILED" in features.h_note
