"""The GPU node's measured path, as far as it runs without a GPU: times from paired runs, the
settings it reads, and measure_candidate choosing it (the runners themselves: see
test_profile_paired_timing.py; on a GPU: bench/gpu/paired_aa.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from kernelband.config import get_settings
from kernelband.problem import load_problem
from kernelband.profile import paired_gpu
from kernelband.profile.features import Features
from kernelband.profile.measurement import Measurement
from kernelband.profile.paired import PairedSpeedup
from kernelband.profile.paired_gpu import config_from_settings
from kernelband.profile.paired_result import paired_measurement
from kernelband.profile.paired_runners import PairedConfig
from kernelband.profile.paired_timing import PairedRun
from kernelband.sandbox.cores import parse_cores

FIXTURE = Path(__file__).parent / "fixtures" / "paired_problem.py"


def _run() -> PairedRun:
    run = PairedRun(["a", "b"], {"a": 10, "b": 4})
    run.case_original_ms = {"a": [1.0, 1.1, 0.9, 1.0], "b": [2.0, 2.0, 2.2, 1.8]}
    run.case_candidate_ms = {"a": [0.5, 0.55, 0.45, 0.5], "b": [2.0, 2.0, 2.2, 1.8]}
    run.original_ms = [3.0, 3.1, 3.1, 2.8]
    run.candidate_ms = [2.5, 2.55, 2.65, 2.3]
    run.judged_ms = {"original": 30.0, "candidate": 25.0}
    run.claimed_ms = {"original": 29.0, "candidate": 24.0}
    return run


def test_times_are_a_baseline_over_the_paired_speedup() -> None:
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    own = paired_measurement(problem, _run(), device_name="NVIDIA H200", target="h200", config=PairedConfig())
    assert own.speedup is not None and own.label == "measured"
    assert own.time_ms == pytest.approx(own.checks["session_baseline_ms"] / own.speedup.point)
    assert own.paired_ratio == pytest.approx(1 / own.speedup.point)
    # a track's baseline: every time is that baseline over the speedup, cases scaled alike
    fixed = paired_measurement(problem, _run(), device_name="NVIDIA H200", target="h200",
                               config=PairedConfig(), baseline_ms=6.0)
    assert fixed.time_ms == pytest.approx(6.0 / own.speedup.point)
    scale = 6.0 / own.checks["session_baseline_ms"]
    assert fixed.case_times_ms["a"] == pytest.approx(scale * 1.0 / 2.0)
    assert fixed.case_times_ms["b"] == pytest.approx(scale * 2.0)
    assert "k=10/4" in fixed.method and "verified by the judge" in fixed.method
    assert "not kernel timings" not in fixed.method


def test_measuring_cores_are_read_from_the_setting() -> None:
    assert parse_cores("") == ()
    assert parse_cores("0-3, 8") == (0, 1, 2, 3, 8)
    with pytest.raises(ValueError, match="0-3,8"):
        parse_cores("first four")


def test_a_gpu_node_measures_paired_with_the_tracks_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import paired_gpu, sandboxed

    speedup = PairedSpeedup(1.25, 1.2, 1.3, 20, "judge clock", "original")
    measured = Measurement("measured", "judge clock", "NVIDIA H200", "h200", 4.0, {"n64": 4.0},
                           checks={"parts_s": {"load_candidate": 0.4, "timed_rounds": 0.2}}, speedup=speedup)
    features = Features((0.1, 32.0, 0.0, 7.0, 100.0), ("driver",) + ("static",) * 4,
                        (1.0, 2.0, 3.0), ("estimate",) * 3)
    seen: dict[str, Any] = {}

    def fake(problem: Any, editable: Any, target: str, **kwargs: Any) -> Any:
        seen.update(kwargs, target=target)
        return measured, features, None

    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(sandboxed, "_signature_skipped", lambda wanted, limits: "")  # ncu would run
    monkeypatch.setattr(paired_gpu, "measure_paired_on_gpu", fake)
    timings: dict[str, float] = {}
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    out, _ = sandboxed.measure_candidate(problem, "x", "h200", baseline_ms=5.0, timings=timings)
    assert out.speedup == speedup and seen["baseline_ms"] == 5.0 and seen["target"] == "h200"
    assert timings == {"measure_load_candidate": 0.4, "measure_timed_rounds": 0.2}
    assert Measurement.from_dict(out.to_dict()).speedup == speedup


def test_a_run_over_a_subset_of_the_cases_is_labelled_and_a_full_one_is_not() -> None:
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    full = paired_measurement(problem, _run(), device_name="NVIDIA H200", target="h200", config=PairedConfig())
    assert "timed on" not in full.method and "timed_cases" not in full.checks and "cases_total" not in full.checks
    subset = _run()
    subset.cases_total = 16
    measured = paired_measurement(problem, subset, device_name="NVIDIA H200", target="h200", config=PairedConfig())
    assert "timed on 2 of 16 cases (evenly spread, first and last)" in measured.method
    assert measured.checks["timed_cases"] == ["a", "b"] and measured.checks["cases_total"] == 16
    assert list(measured.case_times_ms) == ["a", "b"]


def test_the_node_times_at_most_the_configured_number_of_cases() -> None:
    assert config_from_settings().max_cases == get_settings().measure_max_cases


def test_the_features_pass_names_the_slowest_timed_case_by_its_index_among_all_the_runners_cases() -> None:
    asked: dict[str, Any] = {}

    class Session:
        def request(self, command: dict[str, Any], timeout_s: float) -> Any:
            asked.update(command)
            return type("Reply", (), {"value": {"ok": True, "features": {}}})()

    candidate = type("Candidate", (), {"cases": ["x", "a", "y", "b"], "session": Session()})()
    paired_gpu._features_after("h200", placeholder=False)(candidate, _run())  # b: 2 ms, a: 0.5 ms
    assert asked["slowest"] == 3 and asked["time_ms"] == pytest.approx(2.5)


def test_the_compile_steps_static_features_replace_the_features_pass_when_no_ncu_pass_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import paired_gpu, sandboxed

    static = Features((0.5, 40.0, 2.0, 7.0, 50.0), ("estimate",) + ("static",) * 4,
                      (60.0, 30.0, 10.0), ("estimate",) * 3)
    seen: dict[str, Any] = {}

    def fake(problem: Any, editable: Any, target: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        features = Features.from_dict(paired_gpu._features_of_run(_run(), kwargs["static"])["features"])
        return Measurement("measured", "judge clock", "NVIDIA H200", "h200", 2.5, {"a": 0.5}), features, None

    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(paired_gpu, "measure_paired_on_gpu", fake)
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    _, found = sandboxed.measure_candidate(problem, "x", "h200", hardware_signature=False,
                                           static_features=static.to_dict())
    assert seen["static"] == static and seen["features"] is True
    assert found.phi[1:] == static.phi[1:] and found.h == static.h and found.h_sources == static.h_sources
    assert found.phi[0] == pytest.approx(math.log1p(2.5)) and found.phi_sources[0] == "driver"
    assert "compile step's static profile" in found.h_note and "does not read h" in found.h_note
    # an Nsight Compute pass that would run needs the runner's case: no static shortcut then
    monkeypatch.setattr(sandboxed, "_signature_skipped", lambda wanted, limits: "")
    sandboxed.measure_candidate(problem, "x", "h200", static_features=static.to_dict())
    assert seen["static"] is None


def test_without_the_compile_steps_features_a_static_report_stands_in_for_the_features_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import paired_gpu, sandboxed
    from kernelband.profile.measurement import MeasureError

    static = Features((0.5, 40.0, 2.0, 7.0, 50.0), ("estimate",) + ("static",) * 4,
                      (60.0, 30.0, 10.0), ("estimate",) * 3)
    seen: dict[str, Any] = {}
    measured = Measurement("measured", "judge clock", "NVIDIA H200", "h200", 2.5, {"a": 0.5})

    def fake(problem: Any, editable: Any, target: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return measured, static, None

    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(paired_gpu, "measure_paired_on_gpu", fake)
    monkeypatch.setattr(sandboxed, "static_profile_candidate",
                        lambda problem, editable, target, limits=None: {"features": static.to_dict()})
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    timings: dict[str, float] = {}
    _, found = sandboxed.measure_candidate(problem, None, "h200", hardware_signature=False, timings=timings)
    assert seen["static"]() == static and "measure_static" in timings  # the original: no compile step
    assert "no Nsight Compute pass" in found.h_note  # the static report's features were taken

    def broken(problem: Any, editable: Any, target: str, limits: Any = None) -> Any:
        raise MeasureError("profiling failed in the sandbox")

    monkeypatch.setattr(sandboxed, "static_profile_candidate", broken)
    _, found = sandboxed.measure_candidate(problem, None, "h200", hardware_signature=False)
    assert seen["static"]() is None  # the runner's features pass takes over
    assert "no Nsight Compute pass" not in found.h_note


def test_the_originals_static_report_is_made_beside_its_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile import paired_gpu, sandboxed

    static = Features((0.5, 40.0, 2.0, 7.0, 50.0), ("estimate",) + ("static",) * 4,
                      (60.0, 30.0, 10.0), ("estimate",) * 3)
    measured = Measurement("measured", "judge clock", "NVIDIA H200", "h200", 2.5, {"a": 0.5})

    def slow_report(problem: Any, editable: Any, target: str, limits: Any = None) -> Any:
        time.sleep(0.6)
        return {"features": static.to_dict()}

    def slow_measurement(problem: Any, editable: Any, target: str, **kwargs: Any) -> Any:
        time.sleep(0.6)  # the runner's start and the timed rounds
        return measured, kwargs["static"]() or static, None

    monkeypatch.setattr(sandboxed, "_on_gpu", lambda target: True)
    monkeypatch.setattr(paired_gpu, "measure_paired_on_gpu", slow_measurement)
    monkeypatch.setattr(sandboxed, "static_profile_candidate", slow_report)
    problem = load_problem(FIXTURE.read_text(), "native", "p")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    sandboxed.measure_candidate(problem, None, "h200", hardware_signature=False, timings=timings)
    assert time.perf_counter() - started < 1.0  # 0.6 s each, side by side
    assert timings["measure_static"] >= 0.6


def test_a_static_report_made_beside_decides_the_features_after_the_timing() -> None:
    static = Features((0.5, 40.0, 2.0, 7.0, 50.0), ("estimate",) + ("static",) * 4,
                      (60.0, 30.0, 10.0), ("estimate",) * 3)
    runner_asked: list[bool] = []

    def runner_pass(candidate: Any, run: Any) -> dict[str, Any]:
        runner_asked.append(True)
        return {"features": static.to_dict(), "from": "runner"}

    made = paired_gpu._static_or_runner_pass(lambda: static, runner_pass)(None, _run())
    assert not runner_asked and Features.from_dict(made["features"]).h == static.h
    failed = paired_gpu._static_or_runner_pass(lambda: None, runner_pass)(None, _run())
    assert runner_asked and failed["from"] == "runner"


def test_a_features_pass_the_runner_cannot_make_leaves_the_time_and_says_why() -> None:
    class Session:
        def request(self, command: dict[str, Any], timeout_s: float) -> Any:
            return type("Reply", (), {"value": {"ok": False, "error": "StaticProfileError: no pointer type"}})()

    candidate = type("Candidate", (), {"cases": ["a", "b"], "session": Session()})()
    found = Features.from_dict(paired_gpu._features_after("h200", placeholder=False)(candidate, _run())["features"])
    assert found.phi[0] == pytest.approx(math.log1p(2.5)) and found.phi_sources[0] == "driver"
    assert "features pass failed" in found.h_note and "no pointer type" in found.h_note
