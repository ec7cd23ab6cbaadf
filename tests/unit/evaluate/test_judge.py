"""The judge's own decisions from loaded material: no sandbox, no problem module imported."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelband.evaluate import judge, raw_outputs
from kernelband.evaluate.judge import Judge, Material, RunnerReport
from kernelband.evaluate.raw_outputs import Unreadable, read_outputs
from kernelband.evaluate.references import ReferenceStore
from kernelband.problem import Case, KernelProblem
from kernelband.runner import outputs as runner_outputs


def _problem(**extra: object) -> KernelProblem:
    fields: dict[str, object] = {
        "name": "p", "format": "native", "source": "", "editable": "", "entry": "entry",
        "kernel_names": ("k",), "cases": (Case("small", {"n": 8}),),
        "held_out_cases": (Case("secret", {"n": 3001}, held_out=True),)}
    return KernelProblem(**{**fields, **extra})  # type: ignore[arg-type]


def _material(entries: list[judge.Entry], reference: torch.Tensor, candidate: torch.Tensor,
              again: torch.Tensor | None = None) -> Material:
    files = {}
    for e in entries:
        files[e.file("candidate")] = candidate
        files[e.file("candidate_again")] = candidate if again is None else again
    return Material({e.index: reference for e in entries}, {}, files)


def test_plan_labels_held_out_cases_without_their_names() -> None:
    entries = judge.plan(_problem(), held_out=True, seeds=2, base_seed=100)
    assert [e.where for e in entries] == ["case small, seed 0", "case small, seed 1",
                                         "held-out case #1, seed 0", "held-out case #1, seed 1"]
    assert [e.seed for e in entries] == [100, 101, 100, 101]
    assert judge.runner_problem(_problem(), entries[:2])["held_out_cases"] == []
    assert judge.runner_problem(_problem(), entries)["held_out_cases"]


def test_a_wrong_result_is_measured_by_the_judge() -> None:
    entries = judge.plan(_problem(), held_out=False, seeds=1, base_seed=1)
    reference = torch.arange(8, dtype=torch.float32)
    verdict = Judge(_problem(), entries, _material(entries, reference, torch.zeros(8))).decide(
        RunnerReport(False), 1)
    assert verdict.reason == "wrong_result" and verdict.details["max_abs_err"] == 7.0


def test_a_runner_that_claims_ok_for_a_wrong_result_changes_nothing() -> None:
    entries = judge.plan(_problem(), held_out=False, seeds=1, base_seed=1)
    forged = RunnerReport.parse({"status": "ok", "correct": True, "max_abs_err": 0.0})
    verdict = Judge(_problem(), entries, _material(entries, torch.ones(8), torch.zeros(8))).decide(forged, 1)
    assert not verdict.correct and verdict.details["max_abs_err"] == 1.0


def test_two_different_candidate_runs_are_nondeterministic_unless_the_reference_moves() -> None:
    entries = judge.plan(_problem(), held_out=False, seeds=1, base_seed=1)
    ref = torch.ones(8)
    flaky = _material(entries, ref, ref.clone(), again=ref + 1e-6)
    assert Judge(_problem(), entries, flaky).decide(RunnerReport(False), 1).reason == "nondeterministic"
    moving = Judge(_problem(), entries, flaky, known_spreads={"small": 1e-6}).decide(RunnerReport(False), 1)
    assert moving.correct and "nondeterminism_allowed" in moving.flags, moving.message


def test_a_difference_within_twice_the_references_own_spread_passes() -> None:
    entries = judge.plan(_problem(), held_out=False, seeds=1, base_seed=1)
    ref = torch.ones(8)
    off = _material(entries, ref, ref + 1e-3)
    off.reference_again["small"] = ref + 1e-3  # the reference itself moved by 1e-3
    assert Judge(_problem(), entries, off).decide(RunnerReport(False), 1).correct
    far = _material(entries, ref, ref + 1e-1)
    far.reference_again["small"] = ref + 1e-3
    assert Judge(_problem(), entries, far).decide(RunnerReport(False), 1).reason == "wrong_result"


def test_runner_words_are_replaced_on_held_out_cases_and_kept_on_public_ones() -> None:
    entries = judge.plan(_problem(), held_out=True, seeds=1, base_seed=1)
    material = _material(entries, torch.ones(8), torch.ones(8))
    leak = {"status": "rejected", "reason": "candidate_error", "message": "shape (3001,)", "step": 1}
    verdict = Judge(_problem(), entries, material).decide(RunnerReport.parse(leak), 1)
    assert verdict.reason == "candidate_error" and "3001" not in verdict.message
    assert "held-out case #1" in verdict.message
    public = Judge(_problem(), entries, material).decide(RunnerReport.parse({**leak, "step": 0}), 1)
    assert "shape (3001,)" in public.message


@pytest.mark.parametrize("value", [None, [], "ok", {"status": "rejected", "reason": "ok"},
                                   {"status": "rejected", "reason": "x" * 80},
                                   {"status": "rejected", "reason": "Bad Reason; rm -rf"}])
def test_a_malformed_runner_report_is_a_named_rejection(value: object) -> None:
    report = RunnerReport.parse(value)
    assert report.rejected and report.reason in ("runner_report_invalid", "runner_rejected")


def test_outputs_are_read_weights_only_from_regular_files_the_judge_named(tmp_path: Path) -> None:
    folder = tmp_path / raw_outputs.OUTPUT_DIR
    folder.mkdir()
    torch.save({"out": torch.ones(3), "n": 2}, folder / "good.pt")
    torch.save(Path("/"), folder / "object.pt")  # a pickled object, not plain data
    (folder / "link.pt").symlink_to(folder / "good.pt")
    os.mkfifo(folder / "fifo.pt")
    (folder / "big.pt").write_bytes(b"0" * 9000)
    found = read_outputs(str(tmp_path), ["good.pt", "object.pt", "link.pt", "fifo.pt", "big.pt", "gone.pt"],
                         max_bytes=8192)
    assert torch.equal(found["good.pt"]["out"], torch.ones(3)) and found["good.pt"]["n"] == 2
    assert {k: v.reason for k, v in found.items() if isinstance(v, Unreadable)} == {
        "object.pt": "not_plain", "link.pt": "not_plain", "fifo.pt": "not_plain",
        "big.pt": "not_plain", "gone.pt": "missing"}


def test_runner_and_judge_agree_on_the_output_folder() -> None:
    assert runner_outputs.OUTPUT_DIR == raw_outputs.OUTPUT_DIR


def test_runner_outputs_round_trip_through_a_weights_only_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    monkeypatch.chdir(tmp_path)
    big = torch.arange(1000.0)
    value = {"view": big[:3], "pair": (torch.ones(2), 1.5), "np": np.ones(2), "scalar": np.float32(2.0),
             "other": object()}
    runner_outputs.write_output("x.pt", value)
    assert os.path.getsize(tmp_path / raw_outputs.OUTPUT_DIR / "x.pt") < 3500  # the view, not its storage
    loaded = read_outputs(str(tmp_path), ["x.pt"])["x.pt"]
    assert torch.equal(loaded["view"], big[:3]) and loaded["pair"][1] == 1.5
    assert torch.equal(loaded["np"], torch.ones(2, dtype=torch.float64)) and loaded["scalar"] == 2.0
    assert loaded["other"].startswith("<object>")


def test_reference_store_is_bounded_and_reseeds() -> None:
    store = ReferenceStore(max_bytes=3 * (4 * 8 + 64))
    for seed in range(5):
        store.keep("p", "c", seed, torch.ones(8))
    assert store.output("p", "c", 0) is None and store.output("p", "c", 4) is not None
    first = store.base_seed("p")
    assert all(store.base_seed("p") == first for _ in range(10))
    store.keep_spread("p", "c", 0.5)
    for _ in range(64):
        store.base_seed("p")
    assert store.spread("p", "c") is None and store.output("p", "c", 4) is None  # a new seed drops them
