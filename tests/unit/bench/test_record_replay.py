"""The replay recorder (CPU mode) and the measured replay benchmark's loading and verdicts."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import numpy as np
import pytest

from bench.gpu.record_replay import FileLock, corpus_files
from bench.gpu.recording import record_problem, variants
from bench.policy_bench.experiments import LandscapeResult
from bench.policy_bench.measured import decide
from bench.policy_bench.replay import load_replay
from kernelband.bandit import STRATEGY_NAMES
from kernelband.problem.devices import restore_interpreter_env
from kernelband.problem.editable import extract_region

TINY = """import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


def relu(x):
    out = torch.empty_like(x)
    n = x.numel()
    relu_kernel[(triton.cdiv(n, 32),)](x, out, n, BLOCK_SIZE=32)
    return out


##################################################################################################


def test_relu():
    return {"small": relu(torch.randn(40, device="cuda"))}
"""


@pytest.fixture()
def relu_table(tmp_path: Path) -> dict:
    (tmp_path / "relu.py").write_text(TINY)
    try:
        summary = record_problem(tmp_path / "relu.py", tmp_path, "cpu", depth=1, budget_s=600, seeds=1)
    finally:
        restore_interpreter_env()
    assert summary["status"] == "complete", summary
    return json.loads((tmp_path / "relu.json").read_text())


def test_cpu_recording_holds_every_rules_rewrite_of_the_parent(relu_table: dict) -> None:
    problem = relu_table["problems"][0]
    region = extract_region(TINY, "tritonbench")
    rows = problem["transitions"]
    for strategy in STRATEGY_NAMES:
        expected = len(variants(region, strategy, False, "relu")) or 1  # none: one failure row
        assert len([r for r in rows if r["strategy"] == strategy]) == expected
    assert {r["reason"] for r in rows if r["strategy"] == "fusion"} == {"no_applicable_transformation"}
    assert relu_table["label"] == "estimated" and relu_table["simulated"] is False
    for kernel in problem["kernels"].values():
        assert kernel["time_ms"] > 0 and len(kernel["h"]) == 3 and len(kernel["phi"]) == 5
    assert all(r["child"] in problem["kernels"] for r in rows if r["child"] is not None)


def test_corpus_files_come_smallest_first_and_unknown_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("x" * 100)
    (tmp_path / "small.py").write_text("x")
    (tmp_path / "_hidden.py").write_text("")
    assert [p.stem for p in corpus_files(tmp_path, "", 0)] == ["small", "big"]
    with pytest.raises(SystemExit, match="nope"):
        corpus_files(tmp_path, "nope", 0)
    with pytest.raises(SystemExit, match="not a folder"):
        corpus_files(tmp_path / "missing", "", 0)


def test_gpu_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    path = str(tmp_path / "gpu.lock")
    with FileLock(path):
        fd = os.open(path, os.O_RDWR)
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(fd)
    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on exit
    os.close(fd)


def _doc(name: str, rows: list[dict]) -> dict:
    kernels = {"orig": {"time_ms": 2.0, "phi": [], "h": []}, "k1": {"time_ms": 1.0}}
    return {"format": "kernelband-replay/1", "simulated": False, "label": "estimated",
            "problems": [{"name": name, "original": "orig", "kernels": kernels, "transitions": rows}]}


def test_replay_folder_skips_provenance_and_problems_without_rows(tmp_path: Path) -> None:
    row = {"parent": "orig", "strategy": "tiling", "child": "k1", "reason": "ok"}
    (tmp_path / "a.json").write_text(json.dumps(_doc("a", [row])))
    (tmp_path / "b.json").write_text(json.dumps(_doc("b", [])))
    (tmp_path / "provenance.json").write_text(json.dumps({"label": "estimated"}))
    problems, simulated = load_replay(tmp_path)
    assert [p.name for p in problems] == ["a"] and simulated is False
    assert problems[0].transitions[("orig", "tiling")] == ["k1"]


def _result(name: str, means: dict[str, float]) -> LandscapeResult:
    rng = np.random.default_rng(0)
    result = LandscapeResult(name)
    for policy, mean in means.items():
        result.curves[policy] = np.ones((50, 21)) * mean + rng.normal(0, 0.01, (50, 21))
    return result


def test_default_verdict_names_the_leader_and_whether_it_separates() -> None:
    measured = _result("replay", {"hwucb": 1.5, "ucb1": 1.2, "kernelband": 1.4999})
    simulated = [_result("paper", {"hwucb": 1.0, "ucb1": 1.3, "kernelband": 1.0})]
    text = "\n".join(decide(measured, simulated))
    assert "`hwucb`" in text and "beats (non-overlapping CIs) `ucb1`" in text
    assert "does not separate from (overlapping CIs) `kernelband`" in text
    assert "significantly worse on paper (vs ucb1" in text
