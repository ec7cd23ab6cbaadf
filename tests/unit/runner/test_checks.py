"""The runner's anti-cheat checks: one list, each check with its own reason, made in order."""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from kernelband.evaluate.integrity import TimerSeal
from kernelband.runner import checks
from kernelband.runner.checks import AT_RETURN, CHECKS, ON_RESULT, CandidateCall, first_failure
from kernelband.runner.host_work import HostWork
from kernelband.runner.observe import (
    changed_after_return,
    early_copy,
    live_threads,
    scrub_reference,
)


def _call(args: list[torch.Tensor] | None = None, **fields: object) -> CandidateCall:
    out = torch.ones(4)
    base: dict[str, object] = {"out": out, "early": early_copy(out), "launches": [object()],
                               "threads": live_threads()}
    return CandidateCall("case=c0 seed=1", args or [torch.zeros(4)], **{**base, **fields})  # type: ignore[arg-type]


def test_every_check_has_its_own_name_and_reason_and_says_what_it_checks() -> None:
    reasons = [c.reason for c in CHECKS]
    assert len(set(reasons)) == len(reasons) and len({c.name for c in CHECKS}) == len(CHECKS)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", r) and c.checks for r, c in zip(reasons, CHECKS, strict=True))
    assert reasons[0] == "sandbox_violation"
    assert [c.reason for c in AT_RETURN][:3] == ["background_thread", "timer_tampered", "side_stream_launch"]
    assert ON_RESULT[-1].reason == "input_mutated"


def test_an_honest_call_passes_every_check() -> None:
    call = _call(before=[torch.zeros(4)])
    assert first_failure(CHECKS, call) is None


def test_the_first_check_that_finds_something_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    seal = TimerSeal()
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    found = first_failure(AT_RETURN, _call(seal=seal, launches=[], count_launches=True))
    assert found is not None and found[0].reason == "timer_tampered" and "time.perf_counter" in found[1]
    monkeypatch.undo()
    found = first_failure(AT_RETURN, _call(seal=seal, launches=[]))
    assert found is not None and found[0].reason == "decoy_no_triton_launch"
    assert first_failure(AT_RETURN, _call(launches=[], cached=True)) is None  # launched in an earlier run
    found = first_failure(AT_RETURN, _call(launches=[SimpleNamespace(kernel_name="side", stream=-1)]))
    assert found is not None and found[0].reason == "side_stream_launch" and "side" in found[1]


def test_host_exports_and_torch_work_share_one_limit() -> None:
    host = HostWork()
    host.elements, host.ops = int(4 * checks.SHARE_LIMIT), {"numpy": 4}
    work = SimpleNamespace(elements=0, input_elements=lambda args: 4)
    found = first_failure(AT_RETURN, _call(host=host, work=work))
    assert found is not None and found[0].reason == "decoy_host_compute" and "numpy" in found[1]
    host.elements = 1
    assert first_failure(AT_RETURN, _call(host=host, work=work)) is None


def test_torch_work_over_the_originals_is_a_decoy_within_it_is_not() -> None:
    work = SimpleNamespace(elements=10, cached=False, input_elements=lambda args: 4, top=lambda: "softmax")
    found = first_failure(ON_RESULT, _call(work=work, before=[torch.zeros(4)], original_work=lambda: 0))
    assert found is not None and found[0].reason == "decoy_torch_compute" and "softmax" in found[1]
    assert first_failure(ON_RESULT, _call(work=work, before=[torch.zeros(4)], original_work=lambda: 10)) is None


def test_results_aliasing_or_mutating_inputs_are_named() -> None:
    x = torch.zeros(4)
    found = first_failure(ON_RESULT, _call([x], out=x[1:], early=early_copy(x[1:]), before=[torch.zeros(4)]))
    assert found is not None and found[0].reason == "output_aliases_input"
    call = _call(before=[torch.zeros(4)])
    call.args[0][0] = 1.0
    found = first_failure(ON_RESULT, call)
    assert found is not None and found[0].reason == "input_mutated" and "[0]" in found[1]
    assert first_failure(ON_RESULT, _call(before=[torch.zeros(4)], inplace=(0,))) is None


def test_a_reference_result_aliasing_its_inputs_or_weights_is_not_poisoned() -> None:
    x = torch.ones(4)
    model = torch.nn.Linear(2, 2)
    runtime = SimpleNamespace(_models={"c": (model, model)})
    weight = model.weight.detach().clone()
    stash = scrub_reference((x[1:], model.weight, torch.zeros(2)), [x], runtime)
    assert torch.equal(x, torch.ones(4)) and torch.equal(model.weight.detach(), weight)
    assert torch.equal(stash[0], torch.ones(3))


def test_a_result_changed_after_return_is_noticed() -> None:
    out = torch.zeros(4)
    early = early_copy(out)
    assert not changed_after_return(early, out)
    out[1] = 1.0
    assert changed_after_return(early, out)
    found = first_failure(ON_RESULT, _call(out=out, early=early, before=[torch.zeros(4)]))
    assert found is not None and found[0].reason == "output_changed_after_return"


def test_a_thread_left_running_is_reported() -> None:
    before = live_threads()
    stop = threading.Event()
    thread = threading.Thread(target=lambda: stop.wait())
    thread.start()
    try:
        found = first_failure(AT_RETURN, _call(threads=before))
    finally:
        stop.set()
        thread.join()
    assert found is not None and found[0].reason == "background_thread"


def test_threads_running_library_plumbing_are_not_the_kernels() -> None:
    before = live_threads()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)  # a method of the threading module
    thread.start()
    try:
        assert first_failure(AT_RETURN, _call(threads=before)) is None
    finally:
        stop.set()
        thread.join()
