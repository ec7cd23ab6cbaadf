"""On a GPU node a candidate's check runs beside its measurement's start: the two overlap, the
timed rounds wait for the verdict, a refused candidate is never measured, and the check runs
under its job's limits and Triton cache like every other sandbox run of the task. With
`measure_before_verdict` the timed rounds do not wait, and a refused candidate's measurement
is dropped."""

from __future__ import annotations

import threading
import time

import pytest

from kernelband.config import get_settings
from kernelband.evaluate.verdict import Verdict
from kernelband.profile.measurement import CandidateRefused, UntilChecked
from kernelband.sandbox import SandboxLimits, job_limits
from kernelband.scheduling import candidate_tasks
from kernelband.scheduling.candidate_tasks import Unmeasured, _check_and_measure

OK = Verdict(correct=True, reason="ok")
WRONG = Verdict.reject("wrong_result", "case 0 differs")


def test_the_check_and_the_runners_start_overlap_and_timing_waits_for_the_verdict() -> None:
    started = threading.Event()  # the measurement began its runners
    order: list[str] = []

    def check() -> Verdict:
        assert started.wait(5), "the check ran alone: the measurement did not start beside it"
        time.sleep(0.1)
        order.append("verdict")
        return OK

    def measure(until_checked: UntilChecked | None) -> Unmeasured:
        started.set()
        assert until_checked is not None
        until_checked()
        order.append("timed")
        return Unmeasured("", "timed")

    timings: dict[str, float] = {}
    verdict, measured = _check_and_measure(timings, check, measure, beside=True)
    assert verdict.correct and isinstance(measured, Unmeasured)
    assert order == ["verdict", "timed"]
    assert timings["check"] >= 0.1 and 0.05 <= timings["check_wait"] <= timings["measure"]


def test_a_refused_candidate_is_never_timed_and_the_verdict_is_the_answer() -> None:
    timed: list[bool] = []

    def measure(until_checked: UntilChecked | None) -> Unmeasured:
        assert until_checked is not None
        try:
            until_checked()
        except CandidateRefused as exc:
            assert "wrong_result" in str(exc)
            return Unmeasured("measure_failed:CandidateRefused", str(exc))
        timed.append(True)
        return Unmeasured("", "timed")

    verdict, measured = _check_and_measure({}, lambda: WRONG, measure, beside=True)
    assert verdict == WRONG and measured is None and not timed


def test_off_a_gpu_the_check_runs_first_and_a_refusal_skips_the_measurement() -> None:
    calls: list[str] = []

    def measure(until_checked: UntilChecked | None) -> Unmeasured:
        calls.append("measure")
        assert until_checked is None
        return Unmeasured("", "")

    assert _check_and_measure({}, lambda: WRONG, measure, beside=False) == (WRONG, None)
    assert calls == []
    timings: dict[str, float] = {}
    verdict, _ = _check_and_measure(timings, lambda: OK, measure, beside=False)
    assert verdict.correct and calls == ["measure"] and "check_wait" not in timings


def test_the_check_thread_runs_under_the_jobs_limits_and_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def evaluate(*args: object, **kwargs: object) -> Verdict:
        limits = SandboxLimits.from_settings()
        seen.update(thread=threading.current_thread().name, scope=limits.cache_scope, wall_s=limits.wall_s)
        return WRONG

    monkeypatch.setattr(candidate_tasks, "evaluate_candidate", evaluate)
    monkeypatch.setattr(candidate_tasks, "_measures_on_gpu", lambda target: True)
    monkeypatch.setattr(candidate_tasks, "_measure", lambda *a, **k: Unmeasured("never", "never"))
    payload = {"problem": {}, "editable": "x", "target": "h100", "job_id": 41, "limits": {"run_s": 7.0}}
    monkeypatch.setattr(candidate_tasks, "problem_of", lambda payload: None)
    monkeypatch.setenv("KERNELBAND_CHECK_IN_RUNNER", "false")  # the check in a child, on a thread beside
    get_settings.cache_clear()
    try:
        with job_limits(None):  # the task's own wrapper sets the job's; nothing leaks from outside
            result = candidate_tasks.profile(payload)
    finally:
        get_settings.cache_clear()
    assert seen["thread"] != threading.current_thread().name
    assert seen["scope"] == "41" and seen["wall_s"] == 7.0
    assert result["ok"] is False and result["reason"] == "wrong_result"


def test_with_the_verdict_after_timing_a_candidate_is_timed_at_once_and_kept_only_if_the_check_passes() -> None:
    for verdict_given, kept in ((OK, True), (WRONG, False)):
        release = threading.Event()  # the check answers only once the measurement is done
        order: list[str] = []

        def check(verdict: Verdict = verdict_given, release: threading.Event = release,
                  order: list[str] = order) -> Verdict:
            assert release.wait(5), "the measurement waited for the check"
            order.append("verdict")
            return verdict

        def measure(until_checked: UntilChecked | None, release: threading.Event = release,
                    order: list[str] = order) -> Unmeasured:
            assert until_checked is None  # nothing to wait for before the timed rounds
            order.append("timed")
            release.set()
            return Unmeasured("", "timed")

        timings: dict[str, float] = {}
        verdict, measured = _check_and_measure(timings, check, measure, beside=True, verdict_first=False)
        assert verdict == verdict_given and order == ["timed", "verdict"]
        assert (measured is not None) is kept  # a refused candidate's measurement is dropped
        assert timings["check_wait"] >= 0.0  # the wait for the verdict, after the measurement


@pytest.mark.parametrize("before", [False, True])
def test_the_setting_decides_whether_the_timed_rounds_wait_for_the_verdict(
        monkeypatch: pytest.MonkeyPatch, before: bool) -> None:
    given: list[bool] = []

    def measure(*args: object, until_checked: UntilChecked | None = None, **kwargs: object) -> Unmeasured:
        given.append(until_checked is not None)
        return Unmeasured("never", "never")

    monkeypatch.setenv("KERNELBAND_MEASURE_BEFORE_VERDICT", str(before).lower())
    monkeypatch.setenv("KERNELBAND_CHECK_IN_RUNNER", "false")  # the check in a child, beside
    get_settings.cache_clear()
    monkeypatch.setattr(candidate_tasks, "evaluate_candidate", lambda *a, **k: OK)
    monkeypatch.setattr(candidate_tasks, "_measures_on_gpu", lambda target: True)
    monkeypatch.setattr(candidate_tasks, "_measure", lambda problem, editable, payload, timings, until_checked=None:
                        measure(until_checked=until_checked))
    monkeypatch.setattr(candidate_tasks, "problem_of", lambda payload: None)
    payload = {"problem": {}, "editable": "x", "target": "h100", "job_id": 41, "limits": {}}
    try:
        with job_limits(None):
            candidate_tasks.profile(payload)
    finally:
        get_settings.cache_clear()
    assert given == [not before]


@pytest.mark.parametrize(("editable", "original_in_runner"), [("x", False), (None, False), (None, True)])
def test_with_the_check_in_the_runner_the_measurement_gets_the_gate_and_its_verdict_is_the_answer(
        monkeypatch: pytest.MonkeyPatch, editable: str | None, original_in_runner: bool) -> None:
    from types import SimpleNamespace

    from kernelband.profile.runner_check import RunnerCheck

    given: list[object] = []
    checked: list[object] = []

    def measure(until_checked: UntilChecked | None) -> Unmeasured:
        given.append(until_checked)
        if editable is None and not original_in_runner:  # checked against itself in a child, beside
            assert until_checked is not None and not isinstance(until_checked, RunnerCheck)
            with pytest.raises(CandidateRefused):
                until_checked()
            return Unmeasured("measure_failed:CandidateRefused", "refused")
        assert isinstance(until_checked, RunnerCheck)
        with pytest.raises(CandidateRefused):  # as the paired measurement meets it
            until_checked.run_in(object())  # type: ignore[arg-type]  # a runner's session
        return Unmeasured("measure_failed:CandidateRefused", "refused")

    def check(*args: object, in_runner: object = None, **kwargs: object) -> Verdict:
        checked.append(in_runner)
        return WRONG

    monkeypatch.setenv("KERNELBAND_CHECK_IN_RUNNER", "true")
    monkeypatch.setenv("KERNELBAND_CHECK_ORIGINAL_IN_RUNNER", str(original_in_runner).lower())
    get_settings.cache_clear()
    monkeypatch.setattr(candidate_tasks, "evaluate_candidate", check)
    monkeypatch.setattr(candidate_tasks, "_measures_on_gpu", lambda target: True)
    monkeypatch.setattr(candidate_tasks, "_measure", lambda problem, editable, payload, timings, until_checked=None:
                        measure(until_checked))
    monkeypatch.setattr(candidate_tasks, "problem_of", lambda payload: SimpleNamespace(needs_translation=False))
    monkeypatch.setattr(candidate_tasks, "editable_of", lambda payload: payload["editable"])
    payload: dict[str, object] = {"problem": {}, "editable": editable, "target": "h100", "job_id": 41, "limits": {}}
    try:
        with job_limits(None):
            result = candidate_tasks.profile(payload)
    finally:
        get_settings.cache_clear()
    assert not result["ok"] and result["reason"] == "wrong_result"  # the check's verdict, not the measurement's
    assert len(given) == 1 and len(checked) == 1  # checked once: a candidate in its runner, an original alone
    assert (checked[0] is not None) is (editable is not None or original_in_runner)


def test_a_measurement_that_fails_before_its_runner_checks_leaves_the_check_to_a_child() -> None:
    from kernelband.scheduling.candidate_tasks import _check_in_runner

    calls: list[object] = []

    def check(in_runner: object = None) -> Verdict:
        calls.append(in_runner)
        return OK

    timings: dict[str, float] = {}
    verdict, measured = _check_in_runner(timings, check, lambda gate: Unmeasured("runner_load_failed", "no runner"))
    assert verdict == OK and calls == [None]
    assert isinstance(measured, Unmeasured) and measured.reason == "runner_load_failed"
    assert "check_alone" in timings and "measure" in timings
