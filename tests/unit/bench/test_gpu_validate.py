"""CPU-side tests of bench/gpu: target mapping, shims, replay tables, ranks, report, timing logic."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.gpu import environment, replay_tables, report, results, validate
from bench.policy_bench.replay import load_replay
from kernelband.profile.timing import TimingConfig, measure, measure_paired


def test_target_for_device_maps_hopper_names() -> None:
    assert environment.target_for_device("NVIDIA H100 80GB HBM3") == "h100"
    assert environment.target_for_device("NVIDIA H200") == "h200"
    with pytest.raises(ValueError, match="--target"):
        environment.target_for_device("Some Other GPU")


def test_litellm_stub_fails_loudly_only_on_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` raise ImportError
    assert environment.stub_missing_litellm() is True
    stub = sys.modules["litellm"]
    with pytest.raises(AttributeError, match="not installed"):
        stub.token_counter  # noqa: B018 - attribute access is the behaviour under test


def test_spearman_and_ranks() -> None:
    assert report.ranks([3.0, 1.0, 1.0]) == [3.0, 1.5, 1.5]
    assert report.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert report.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert report.spearman([1, 2], [1, 2]) is None  # too few points
    assert report.spearman([1, 1, 1], [1, 2, 3]) is None  # no spread


def _candidate(cid: int, parent: int | None, decision: str | None, status: str, ms: float | None,
               original: bool = False) -> dict[str, Any]:
    m = None if ms is None else {"label": "measured", "time_ms": ms,
                                 "features": {"phi": [1, 2, 3, 4, 5], "h": [10, 20, 30]}}
    return {"id": cid, "parent_id": parent, "strategy": "tiling", "decision_id": decision,
            "status": status, "reason": None, "editable": f"code{cid}", "original": original,
            "measurement": m}


def _job(policy: str, orig_ms: float) -> dict[str, Any]:
    return {"example": "softmax", "policy": policy, "target": "h100", "status": "completed",
            "records": {
                "candidates": [_candidate(1, None, None, "measured", orig_ms, original=True),
                               _candidate(2, 1, "d1", "measured", 0.5),
                               _candidate(3, 1, "d2", "rejected", None)],
                "generations": [
                    {"parent_id": 1, "strategy": "tiling", "decision_id": "d1", "state": "done"},
                    {"parent_id": 1, "strategy": "fusion", "decision_id": "d2", "state": "done"},
                    {"parent_id": 1, "strategy": "vectorization", "decision_id": "d3",
                     "state": "done"},
                    {"parent_id": 1, "strategy": None, "decision_id": "d4", "state": "done"}]}}


def test_replay_table_pools_jobs_and_loads_in_the_policy_bench(tmp_path: Path) -> None:
    doc = replay_tables.build_replay([_job("ucb1", 1.0), _job("random", 2.0)], "test data")
    problem = doc["problems"][0]
    assert problem["kernels"]["orig"]["time_ms"] == pytest.approx(1.5)  # median of the two
    assert problem["kernels"]["ucb1-c2"]["h"] == [10.0, 20.0, 30.0]
    rows = [(r["strategy"], r["child"]) for r in problem["transitions"]]
    assert rows[:3] == [("tiling", "ucb1-c2"), ("fusion", None), ("vectorization", None)]
    assert doc["skipped_generations"] == 2  # the free-choice pull of each job
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(doc))
    problems, simulated = load_replay(path)
    assert simulated is False and problems[0].transitions[("orig", "tiling")] == ["ucb1-c2", "random-c2"]


class _FakeEvent:
    def __init__(self, clock: list[float]) -> None:
        self.clock, self.at = clock, 0.0

    def record(self) -> None:
        self.at = self.clock[0]

    def elapsed_ms(self, end: Any) -> float:
        return float(end.at - self.at)


class _FakeDevice:
    """Each run advances a fake clock by a fixed time: the paired A/A ratio must be 1."""

    name = "fake"

    def __init__(self) -> None:
        self.clock = [0.0]

    def event(self) -> _FakeEvent:
        return _FakeEvent(self.clock)

    def synchronize(self) -> None:
        pass

    def flush_l2(self) -> None:
        pass

    def run(self) -> None:
        self.clock[0] += 0.25


def test_timing_logic_on_the_fake_device() -> None:
    device = _FakeDevice()
    prepare = lambda: device.run  # noqa: E731 - the shape timing.measure expects
    config = TimingConfig(min_reps=5, max_reps=20, budget_ms=2.0)
    stats = measure(device, prepare, config)
    assert stats.median_ms == pytest.approx(0.25) and stats.cv == pytest.approx(0.0)
    assert measure_paired(device, prepare, prepare, config).ratio == pytest.approx(1.0)


def test_report_renders_real_and_missing_steps(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "env.json").write_text(json.dumps({"device": "NVIDIA H100", "torch": "2.11"}))
    examples = [{"example": "softmax", "correctness": {"correct": True, "cases_checked": 3},
                 "timing": [{"case": "a", "ours_ms": 0.0101, "ours_again_ms": 0.0102,
                             "do_bench_ms": 0.01, "ratio_vs_do_bench": 1.01, "cv": 0.02,
                             "aa_paired_ratio": 1.0}],
                 "static": [{"case": "a", "kernel": "k", "static_regs": 32, "driver_regs": 32,
                             "static_shared": 0, "driver_shared": 0, "regs_match": True,
                             "shared_match": True}]}]
    (out / "examples.json").write_text(json.dumps(examples))
    (out / "optimize.json").write_text(json.dumps([_job("ucb1", 1.0)]))
    md, replay = tmp_path / "RESULTS.md", tmp_path / "replay.json"
    results.write_report([out], md, replay)
    text = md.read_text()
    assert "NVIDIA H100" in text and "| softmax | a | 10.1 |" in text
    assert "## Nsight Compute" in text and "Not run." in text  # ncu.json absent
    assert json.loads(replay.read_text())["simulated"] is False
    assert "Spearman" in text


def test_cli_requires_a_step_and_filters_examples() -> None:
    with pytest.raises(SystemExit):
        validate.parse_args([])
    names = [p.stem for p in validate.selected_examples("softmax,matmul", validate.OPTIMIZE_ORDER)]
    assert names == ["softmax", "matmul"]
    with pytest.raises(SystemExit, match="unknown example"):
        validate.selected_examples("nope")


def test_later_runs_replace_jobs_per_example_and_policy() -> None:
    first: list[dict[str, Any]] = [
        {"example": "softmax", "policy": "ucb1", "status": "completed", "best_speedup": 1.0},
        {"example": "matmul", "policy": "ucb1", "status": "completed", "best_speedup": 1.2}]
    second: list[dict[str, Any]] = [
        {"example": "softmax", "policy": "ucb1", "status": "completed", "best_speedup": 1.3},
        {"example": "matmul", "policy": "ucb1", "status": "not run"}]
    merged = {(j["example"], j["policy"]): j for j in results.merge_jobs(first, second, "run2")}
    assert merged[("softmax", "ucb1")]["best_speedup"] == 1.3
    assert merged[("softmax", "ucb1")]["run"] == "run2"
    assert merged[("matmul", "ucb1")]["best_speedup"] == 1.2  # a `not run` never hides a result


def test_scaled_case_grows_known_shapes_only() -> None:
    from bench.gpu.examples_check import scaled_case
    from kernelband.problem.model import Case

    grown = scaled_case(Case("r16_c128", {"rows": 16, "cols": 128}))
    assert grown is not None and grown.params == {"rows": 4096, "cols": 4096}
    assert grown.name == "r16_c128@scaled"
    assert scaled_case(Case("n1000", {"n": 1000})).params["n"] == 1 << 25  # type: ignore[union-attr]
    assert scaled_case(Case("odd", {"width": 3})) is None


def test_scaled_source_rewrites_only_the_case_lists(tmp_path: Path) -> None:
    from bench.gpu.examples_check import load_example
    from bench.gpu.scaled import scaled_source, write_scaled_examples

    original = Path("examples/softmax.py").read_text()
    text, public, held = scaled_source(original)
    assert text.split("CASES =")[0] == original.split("CASES =")[0]  # kernels untouched
    assert [c["params"] for c in public] == [{"rows": 4096, "cols": 4096},
                                             {"rows": 2048, "cols": 6000}]
    assert {c["dtype"] for c in public} == {"float32", "float16"}
    assert not {c["name"] for c in public} & {c["name"] for c in held}  # held-out shapes differ
    assert any(c["params"]["cols"] % 2 for c in held)  # a non-power-of-2 size is held out
    [(path, cases)] = write_scaled_examples([Path("examples/vector_add.py")], tmp_path)
    problem = load_example(path)
    assert [c.params["n"] for c in problem.cases] == [1 << 24, 10_000_003]
    assert [c.name for c in problem.held_out_cases] == [c["name"] for c in cases["held_out"]]
    assert Path("examples/vector_add.py").read_text().count("n1000") > 0  # examples/ unchanged


def test_scaled_cases_refuse_unknown_parameters() -> None:
    from bench.gpu.scaled import scaled_cases

    with pytest.raises(ValueError, match="cannot scale"):
        scaled_cases([{"name": "x", "params": {"width": 3}}], [])


def test_scaled_report_tables_and_replay(tmp_path: Path) -> None:
    from bench.gpu.scaled_report import best_rows, job_noise, scaled_report

    run = tmp_path / "scaled1"
    run.mkdir()
    jobs = [dict(_job(p, 1.0), seed=0, budget=20, iterations_done=12, original_ms=1.0,
                 best_ms=0.5, best_speedup=2.0, held_out="passed", mode="scaled",
                 cases={"public": [{"name": "r4096_c4096"}], "held_out": [{"name": "r3000_c5001"}]})
            for p in ("kernelband", "random")]
    jobs[0]["records"]["candidates"][1]["measurement"].update(cv=0.2, noisy=True)
    (run / "optimize.json").write_text(json.dumps(jobs + [{"example": "softmax", "policy": "ucb1",
                                                           "status": "not run"}]))
    assert job_noise(jobs[0])["noisy"] == 1 and job_noise(jobs[1])["noisy"] == 0
    assert best_rows(jobs) == [["softmax", "2.00x (seed 0)", "2.00x (seed 0)", "not run"]]
    replay = tmp_path / "scaled.json"
    text = scaled_report([run], replay, [replay])
    assert "public r4096_c4096; held-out r3000_c5001" in text and "12/20" in text
    assert json.loads(replay.read_text())["simulated"] is False
    assert "| kernelband |" in text.split("Policy benchmark")[1]  # replay benchmark table
    # a later run of the same job, with step timings: the job table keeps only the latest
    # run, the timing table lists every run that recorded timings
    later = tmp_path / "stages2"
    later.mkdir()
    stage = {"kind": "profile", "finished": 3, "failed": 0, "work_median_s": 2.5,
             "work_p90_s": 3.0, "work_total_s": 7.5, "wait_median_s": None,
             "parts": {"check": 1.0, "measure": 1.25}}
    (later / "optimize.json").write_text(json.dumps([dict(jobs[0], iterations_done=20,
                                                          stages=[stage])]))
    text = scaled_report([run, later], replay, [])
    assert "20/20" in text and "| softmax | kernelband | 0 | completed | 12/20" not in text
    assert ("| softmax | kernelband | stages2 | profile | 3 | 2.50 | 3.00 | 7.5 | - | "
            "check 1.00, measure 1.25 |") in text


def test_each_report_appends_its_own_machines_notes() -> None:
    gpu = Path(results.__file__).parent
    assert results.notes_path(Path("bench/gpu/RESULTS.md")) == gpu / "notes.md"
    assert results.notes_path(Path("bench/gpu/RESULTS-h100.md")) == gpu / "notes-h100.md"
    assert (results.notes_path(Path("x/RESULTS-h100.md"), "notes_scaled")
            == gpu / "notes_scaled-h100.md")
