"""The harness's own integrity: sealed timers, plain outputs, scrubbed reference memory."""

from __future__ import annotations

import statistics
import time
from types import SimpleNamespace

import pytest
import torch

from kernelband.evaluate import integrity


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


def test_scrub_and_l2_reset_are_no_ops_without_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: this checks the CPU path")
    assert integrity.scrub_free_memory() == 0
    assert integrity.reset_l2_persistence() is False


def test_launches_on_another_stream_are_named() -> None:
    records = [SimpleNamespace(kernel_name="main", stream=7), SimpleNamespace(kernel_name="side", stream=9),
               SimpleNamespace(kernel_name="interp", stream=None)]
    assert integrity.launch_streams(records, 7) == ["side"]
