"""The multi-GPU fleet harness's pure parts: worker plan, busy share per worker, scaling table."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bench.gpu.fleet_deploy import NO_MULTICAST_ENV, measuring_specs, worker_specs
from bench.gpu.fleet_records import AttemptRow, busy_by_worker
from bench.gpu.fleet_scaling import gpu_counts, load_rows, pack, parse_args, sweep, write_table
from bench.gpu.fleet_tables import (
    device_line,
    merge_runs,
    per_gpu_hour,
    run_row,
    scaling_markdown,
    scaling_table,
    skipped_row,
)
from kernelband.config import get_settings

QUEUE = "gpu.h200"


def profile(i: int, worker: str | None, start: float, end: float,
            queue: str = QUEUE) -> AttemptRow:
    return AttemptRow(id=i, job_id=1, track_id=1, kind="profile", state="done", tries=1,
                      queue=queue, started_at=start, finished_at=end, has_result=True,
                      worker=worker)


def test_each_gpu_gets_a_pinned_cpu_worker_and_a_measuring_worker_with_the_nodes_gpu_tasks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    specs = worker_specs("h200", 4, 4, gpus=4)
    measuring = measuring_specs(specs, "h200")
    assert [s.node for s in measuring] == ["gpu0@%h", "gpu1@%h", "gpu2@%h", "gpu3@%h"]
    assert {s.queues for s in measuring} == {QUEUE}
    assert all(s.concurrency == get_settings().gpu_tasks_per_device == 3 for s in measuring)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in measuring] == ["0", "1", "2", "3"]
    cpu = [s for s in specs if s.queues == "cpu"]
    assert [(s.node, s.env["CUDA_VISIBLE_DEVICES"], s.concurrency) for s in cpu] == [
        ("cpu0@%h", "0", 4), ("cpu1@%h", "1", 4), ("cpu2@%h", "2", 4), ("cpu3@%h", "3", 4)]
    assert len({s.name for s in specs}) == len(specs)  # one log per worker


def test_workers_take_the_callers_visible_devices_in_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    measuring = measuring_specs(worker_specs("h200", 4, 2, gpus=2), "h200")
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in measuring] == ["2", "3"]
    with pytest.raises(ValueError, match="names only 2"):
        worker_specs("h200", 4, 2, gpus=3)


def test_the_cpu_target_runs_n_measuring_workers_on_the_cpu_queue() -> None:
    measuring = measuring_specs(worker_specs("cpu", 1, 2, gpus=2), "cpu")
    assert [(s.queues, s.node) for s in measuring] == [("cpu", "cpu0@%h"), ("cpu", "cpu1@%h")]


def test_every_worker_starts_with_nvlink_multicast_off(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.gpu.fleet_deploy as deploy

    seen: list[dict[str, str]] = []
    monkeypatch.setattr(deploy, "start_child", lambda name, argv, env, log_dir, cwd=None:
                        seen.append(env))
    for spec in worker_specs("h200", 4, 2, gpus=2):
        deploy.start_worker(spec, {"NCCL_NVLS_ENABLE": "1", "KERNELBAND_DATABASE_URL": "x"},
                            tmp_path)
    assert seen and all(env[k] == v for env in seen for k, v in NO_MULTICAST_ENV.items())
    assert not any("KERNELBAND_DATABASE_URL" in env for env in seen)


def test_busy_share_per_worker_and_over_n_workers() -> None:
    rows = [profile(1, "gpu0@n", 0.0, 6.0), profile(2, "gpu0@n", 5.0, 8.0),  # overlap once
            profile(3, "gpu1@n", 2.0, 4.0), profile(4, "gpu1@n", 0.0, 1.0, queue="cpu")]
    busy = busy_by_worker(rows, QUEUE, (0.0, 10.0), ["gpu0@n", "gpu1@n", "gpu2@n"], 3)
    assert busy["per_worker"] == pytest.approx({"gpu0@n": 0.8, "gpu1@n": 0.2, "gpu2@n": 0.0})
    assert busy["overall"] == pytest.approx((8.0 + 2.0) / (3 * 10.0))
    assert busy_by_worker(rows, QUEUE, (4.0, 4.0), ["gpu0@n"], 1)["overall"] is None
    unknown = busy_by_worker([profile(5, None, 0.0, 5.0)], QUEUE, (0.0, 10.0), [], 1)
    assert unknown["per_worker"] == {"unknown": 0.5}


def results(gpus: int, wall: float, *, finished_at: float = 0.0, problems: tuple[str, ...] =
            ("a", "b"), ok: bool = True, **extra: Any) -> dict[str, Any]:
    busy = {"per_worker": {f"gpu{i}@n": 0.9 for i in range(gpus)}, "overall": 0.9,
            "window_s": wall}
    return {"gpus": gpus, "target": "h200", "problems": list(problems), "budget": 4,
            "parallel": 2, "finished_at": finished_at, "integrity": {"ok": ok},
            "metrics": {"wall_s": wall, "pulls": 32, "pulls_per_s": 32 / wall,
                        "busy_by_worker_suite": busy,
                        "busy_by_worker_active": {**busy, "window_s": wall - 20}},
            "stages": [{"kind": "profile", "work_mean_s": 8.7, "finished": 30, "failed": 6,
                        "parts_median_s": {"signature": 4.2}}], **extra}


def test_efficiency_is_t1_over_n_times_tn_against_the_finished_one_gpu_run() -> None:
    rows = [run_row(results(4, 80.0), "n4"), run_row(results(2, 120.0), "n2"),
            run_row(results(1, 200.0), "n1")]
    table, notes = scaling_table(rows)
    assert [r["gpus"] for r in table] == [1, 2, 4]
    assert [r["efficiency"] for r in table] == pytest.approx([1.0, 200 / 240, 200 / 320])
    assert table[2]["speedup"] == pytest.approx(2.5)
    assert table[2]["efficiency_active"] == pytest.approx(180 / (4 * 60))
    assert table[2]["busy_per_worker"] == {f"gpu{i}": 0.9 for i in range(4)}
    assert notes == []
    # the headline: 36 judged (accepted or refused) over 4 GPUs x the 60 s active window
    assert per_gpu_hour(table[2]) == pytest.approx(36 * 3600 / (4 * 60))
    assert "| 4 | 540.0 | 80.0 |" in scaling_markdown(table, [])


def test_no_efficiency_without_a_comparable_finished_one_gpu_run() -> None:
    table, notes = scaling_table([run_row(results(4, 80.0), "n4"),
                                  run_row(results(1, 200.0, deadline_hit=True), "n1")])
    assert all(r["efficiency"] is None for r in table)
    assert any("no finished N=1 run" in n for n in notes)
    table, notes = scaling_table([run_row(results(4, 80.0, problems=("a",)), "n4"),
                                  run_row(results(1, 200.0), "n1")])
    assert table[1]["efficiency"] is None and any("another suite" in n for n in notes)


def test_merge_keeps_one_run_per_gpu_count_preferring_finished_then_latest() -> None:
    early = run_row(results(2, 130.0, finished_at=1.0), "a/n2")
    late = run_row(results(2, 120.0, finished_at=2.0), "b/n2")
    stopped = run_row(results(2, 90.0, finished_at=3.0, error="boom"), "c/n2")
    merged, notes = merge_runs([early, skipped_row(2, "no time"), late, stopped])
    assert [r["source"] for r in merged] == ["b/n2"]
    assert len(notes) == 3


def test_failed_and_skipped_runs_still_appear_in_the_table() -> None:
    failed = run_row({"gpus": 2, "error": "no results.json"}, "n2")
    table, _ = scaling_table([failed, skipped_row(1, "30 s left")])
    text = scaling_markdown(table, [])
    assert "stopped: no results.json" in text and "skipped: 30 s left" in text
    assert "| 2 | - |" in text


def test_merge_reads_earlier_sweeps_tables(tmp_path: Path) -> None:
    write_table(tmp_path / "a", [run_row(results(4, 80.0), "n4")], None)
    write_table(tmp_path / "b", [run_row(results(1, 200.0), "n1")], None)
    run = tmp_path / "c" / "n2"
    run.mkdir(parents=True)
    pack(run, tmp_path / "c" / "n2.tar.gz")
    with tarfile.open(tmp_path / "c" / "n2.tar.gz") as tar:
        assert "n2" in tar.getnames()
    rows = [*load_rows(tmp_path / "a"), *load_rows(tmp_path / "b" / "scaling.json")]
    assert [r["source"] for r in rows] == ["a/n4", "b/n1"]
    with pytest.raises(SystemExit, match="no scaling.json"):
        load_rows(tmp_path / "c")
    printed = write_table(tmp_path / "merged", rows, "merged")
    assert printed.startswith("# Fleet scaling") and "**merged**" in printed
    saved = json.loads((tmp_path / "merged" / "scaling.json").read_text())
    assert [r["gpus"] for r in saved["table"]] == [1, 4]
    assert saved["table"][1]["efficiency"] == pytest.approx(200 / 320)


def test_gpu_counts_parse_and_refuse_nonsense() -> None:
    assert gpu_counts("4,2,1") == [4, 2, 1]
    with pytest.raises(SystemExit):
        gpu_counts("0")


def test_a_multi_gpu_device_reads_as_one_line() -> None:
    assert device_line("NVIDIA H200, 580\nNVIDIA H200, 580\n") == "NVIDIA H200, 580 (x2)"
    assert device_line("a CPU machine") == "a CPU machine"
    assert device_line(None) is None


def test_a_sweep_skips_a_gpu_count_without_time_and_still_writes_the_table(
        tmp_path: Path) -> None:
    args = parse_args(["--out", str(tmp_path), "--gpus-list", "2,1", "--total-limit-s", "60"])
    rows = sweep(args)
    assert [r.get("skipped", "")[:9] for r in rows] == ["0 s left ", "0 s left "]
    assert "skipped: 0 s left" in (tmp_path / "scaling.md").read_text()
