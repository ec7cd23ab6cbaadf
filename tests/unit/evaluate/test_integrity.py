"""The harness's own integrity: sealed timers, plain outputs, scrubbed reference memory."""

from __future__ import annotations

import statistics
import time
from types import SimpleNamespace

import pytest
import torch

from kernelband.evaluate import hardening, integrity


def test_seal_names_a_replaced_timer_and_statistics_function(monkeypatch: pytest.MonkeyPatch) -> None:
    seal = integrity.TimerSeal()
    assert seal.broken() is None
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert seal.broken() == "time.perf_counter"
    monkeypatch.undo()
    assert seal.broken() is None
    monkeypatch.setattr(statistics, "median", lambda xs: 0.0)
    assert seal.broken() == "statistics.median"


def test_seal_covers_cuda_events_and_triton_do_bench() -> None:
    names = integrity.TimerSeal().objects
    assert "torch.cuda.Event" in names and "torch.cuda.Event.elapsed_time" in names
    assert names["triton.testing.do_bench"] is not None


class _Subclass(torch.Tensor):
    pass


@pytest.mark.parametrize("value, word", [
    (torch.ones(3).as_subclass(_Subclass), "subclass"),
    (torch.empty(3, device="meta"), "materialised"),
    ([torch.ones(2), torch.ones(2).to_sparse()], "materialised"),
])
def test_results_that_are_not_plain_dense_tensors_are_named(value: object, word: str) -> None:
    found = integrity.output_problem(value)
    assert found is not None and word in found


def test_plain_results_pass() -> None:
    assert integrity.output_problem((torch.ones(2), {"a": torch.zeros(1)}, 3.0)) is None


def test_stash_keeps_a_copy_and_poisons_the_reference_output() -> None:
    out = torch.arange(6, dtype=torch.float32)
    stash = integrity.stash_and_scrub(out)
    assert torch.equal(stash, torch.arange(6, dtype=torch.float32))
    assert not bool(out.any())  # a candidate reading the freed memory finds zeros, not the answer


def test_a_reference_result_aliasing_its_inputs_or_weights_is_not_poisoned() -> None:
    x = torch.ones(4)
    model = torch.nn.Linear(2, 2)
    runtime = SimpleNamespace(_models={"c": (model, model)})
    weight = model.weight.detach().clone()
    stash = hardening.scrub_reference((x[1:], model.weight, torch.zeros(2)), [x], runtime)
    assert torch.equal(x, torch.ones(4)) and torch.equal(model.weight.detach(), weight)
    assert torch.equal(stash[0], torch.ones(3))


def test_scrub_and_l2_reset_are_no_ops_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: this checks the CPU path")
    assert integrity.scrub_free_memory() == 0
    assert integrity.reset_l2_persistence() is False


def test_launches_on_another_stream_are_named() -> None:
    records = [SimpleNamespace(kernel_name="main", stream=7), SimpleNamespace(kernel_name="side", stream=9),
               SimpleNamespace(kernel_name="interp", stream=None)]
    assert integrity.launch_streams(records, 7) == ["side"]


def test_a_result_changed_after_return_is_noticed() -> None:
    out = torch.zeros(4)
    early = hardening.early_copy(out)
    assert not hardening.changed_after_return(early, out)
    out[1] = 1.0
    assert hardening.changed_after_return(early, out)


def _wait(stop: object) -> None:
    stop.wait()  # type: ignore[attr-defined]


def test_a_thread_left_running_is_reported() -> None:
    import threading

    before = hardening.live_threads()
    stop = threading.Event()
    thread = threading.Thread(target=_wait, args=(stop,))
    thread.start()
    try:
        found = hardening.after_candidate_call(None, [], before)
    finally:
        stop.set()
        thread.join()
    assert found is not None and found[0] == "background_thread"


def test_threads_running_library_plumbing_are_not_the_kernels() -> None:
    import threading

    before = hardening.live_threads()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)  # a method of the threading module
    thread.start()
    try:
        assert hardening.after_candidate_call(None, [], before) is None
    finally:
        stop.set()
        thread.join()
