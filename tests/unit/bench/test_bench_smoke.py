"""Tiny runs of each `make bench` script's core so the benchmarks cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from bench import api_load, fleet_scaling, scheduler_throughput
from bench.common import machine_line, markers, percentile_ms, python_reference_ms, write_section
from kernelband.db.models import Track
from kernelband.db.session import session_scope
from kernelband.scheduling.state import load_state


def test_scheduler_config_runs_pulls_on_a_seeded_frontier(
    sqlite_factory: sessionmaker[Session],
) -> None:
    row = scheduler_throughput.run_config(sqlite_factory, jobs=2, frontier=12, seconds=0.2)
    assert row["jobs"] == 2 and row["frontier"] == 12
    assert row["pulls_selected"] > 0 and row["select_cycles_per_s"] > 0
    assert row["ingest_cycles_per_s"] > 0 and row["ingest_p99_ms"] >= row["ingest_p50_ms"]
    assert row["results_applied"] >= 3 * row["pulls_selected"] // 2  # batches of results
    with session_scope(sqlite_factory) as session:
        for track in session.query(Track):
            assert track.policy_state is not None and "frontier" not in track.policy_state
            assert len(load_state(track).frontier) >= 12  # seeded plus measured children
    data = {"label": scheduler_throughput.SIMULATED, "seconds_per_config": 0.2, "rows": [row],
            "profile": ""}
    text = scheduler_throughput.section(data)
    assert "SIMULATED" in text and "| 2 | 12 |" in text and "not evaluated" in text


def test_the_scheduler_section_names_the_machine_its_load_and_commit() -> None:
    row = {"jobs": 100, "frontier": 1000, "pulls_per_s": 250.0, "select_p99_ms": 40.0,
           "wall_s": 60.0, "select_cycles_per_s": 5.0, "select_p50_ms": 20.0,
           "select_ms_per_pull": 4.0, "ingest_p99_ms": 30.0, "load_before": "2.00/3.00/4.00",
           "load_after": "2.50/3.00/4.00"}
    data = {"label": scheduler_throughput.SIMULATED, "seconds_per_config": 5.0, "rows": [row],
            "profile": "", "machine": machine_line(), "load_at_end": "1.00/2.00/3.00"}
    text = scheduler_throughput.section(data)
    assert re.search(r"Python reference loop .* \d+ ms; load average", text)
    assert "commit " in text and "from load 2.00/3.00/4.00 to 2.50/3.00/4.00" in text
    assert "Load average at the end: 1.00/2.00/3.00" in text


def test_before_and_after_runs_are_shown_in_the_order_they_ran() -> None:
    row = {"jobs": 100, "frontier": 1000, "pulls_per_s": 250.0, "select_p99_ms": 40.0,
           "wall_s": 60.0, "select_cycles_per_s": 5.0, "select_p50_ms": 20.0,
           "select_ms_per_pull": 4.0, "ingest_p99_ms": 30.0}
    runs = [{**row, "round": 1, "tree": tree, "pulls_per_s": rate,
             "flat_window_pulls_per_s": [100.0, 95.0], "cpu_ms_per_pull_windows": [3.0, 2.0],
             "load_before": "5.00/4.00/3.00", "load_after": "5.50/4.00/3.00"}
            for tree, rate in (("before", 101.0), ("after", 112.5))]
    data = {"label": scheduler_throughput.SIMULATED, "seconds_per_config": 5.0, "rows": [row],
            "profile": "", "sustained_s": 60.0, "comparison": {"against": "abc1234", "runs": runs}}
    text = scheduler_throughput.section(data)
    before = "| 1 | before (abc1234) | 101.0 | 40.0 | 95.0% | 2.50 | 5.00/4.00/3.00 -> 5.50/4.00/3.00 |"
    assert before in text and text.index(before) < text.index("| 1 | after (this commit) | 112.5 |")
    assert "--against abc1234" in text
    assert "Before and after" not in scheduler_throughput.section({**data, "comparison": None})


def test_the_sustained_rate_is_reported_per_window() -> None:
    marks = [(1.0, 100), (2.5, 250), (5.0, 500), (6.0, 550), (10.0, 700), (11.0, 800)]
    assert scheduler_throughput.window_rates(marks, 5.0) == [100.0, 40.0]  # 1 s left: dropped
    assert scheduler_throughput.window_rates([(4.0, 40)], 5.0) == [10.0]  # over half a window
    assert scheduler_throughput.window_rates([], 5.0) == []
    row = {"jobs": 100, "frontier": 1000, "pulls_per_s": 250.0, "select_p99_ms": 40.0,
           "wall_s": 20.0, "window_pulls_per_s": [300.0, 200.0]}
    (rate, _) = scheduler_throughput.targets({"rows": [row]})
    assert rate[1] is False and "per 5 s window: 300.0, 200.0" in rate[2] and "over 20.0 s" in rate[2]


def test_a_flat_cost_keeps_the_last_ten_second_window_near_the_first() -> None:
    row = {"jobs": 100, "frontier": 1000, "pulls_per_s": 650.0, "select_p99_ms": 40.0,
           "wall_s": 60.0, "window_pulls_per_s": [700.0, 600.0],
           "flat_window_pulls_per_s": [700.0, 650.0, 620.0]}
    rate, flat, p99 = scheduler_throughput.targets({"rows": [row]})
    assert rate[1] is True and p99[1] is True
    assert flat[1] is False and "620.0 / 700.0 pulls/s = 88.6%" in flat[2]
    row["flat_window_pulls_per_s"] = [700.0, 640.0]
    assert scheduler_throughput.targets({"rows": [row]})[1][1] is True


def test_a_flat_cost_is_also_checked_on_cpu_per_pull_in_reference_loops() -> None:
    # the VM slowed by a third in the second window; the code's cost per pull did not change
    references = [(1.0, 2.0), (5.0, 2.2), (9.0, 2.0), (12.0, 3.0), (15.0, 2.8), (19.0, 2.6)]
    code = scheduler_throughput.cpu_in_references(references, [(10.0, 1.0), (20.0, 1.4)])
    assert code == [(2.0, 0.5), (2.8, 0.5)]
    row = {"jobs": 100, "frontier": 1000, "pulls_per_s": 650.0, "select_p99_ms": 40.0,
           "wall_s": 20.0, "reference_ms_windows": [2.0, 2.8],
           "cpu_per_pull_in_references": [0.5, 0.5]}
    _, flat_code, _ = scheduler_throughput.targets({"rows": [row]})
    assert flat_code[1] is True and "last / first 100.0%" in flat_code[2] and "2.0, 2.8 ms" in flat_code[2]
    row["cpu_per_pull_in_references"] = [0.5, 0.6]
    assert scheduler_throughput.targets({"rows": [row]})[1][1] is False


def test_the_fleet_records_its_simulated_task_time() -> None:
    data = {"label": fleet_scaling.LABEL, "median_s": 1.5, "sigma": 0.3, "warmup_s": 1.0,
            "window_s": 1.0, "rows": [{"gpus": 1000, "median_s": 1.5, "busy_fraction": 0.95,
                                       "pulls_per_s": 600.0, "pulls_in_flight_allowed": 1200,
                                       "gpu_tasks_finished": 1, "scheduler_cpu_share": 0.5}]}
    ((name, met, _),) = fleet_scaling.targets(data)
    assert met is True and "1.5 s tasks" in name
    assert fleet_scaling.MEDIAN_S == 1.5 and "median 1.5 s" in fleet_scaling.section(data)


def test_fleet_simulation_feeds_simulated_gpus_through_the_real_scheduler() -> None:
    data = fleet_scaling.run_scaling((4,), warmup_s=4.0, window_s=4.0)
    (row,) = data["rows"]
    assert row["gpus"] == 4 and row["gpu_tasks_finished"] > 0 and row["pulls_per_s"] >= 0
    assert 0 < row["busy_fraction"] <= 1.0 and row["scheduler_cpu_share"] > 0
    text = fleet_scaling.section(data)
    assert "SIMULATED" in text and "| 4 |" in text and "not evaluated" in text


def test_busy_time_counts_only_the_window_and_tasks_still_running() -> None:
    spans = {"spans": [[0.0, 2.0], [1.0, 5.0]], "in_service_since": [4.0], "stopped_at": 10.0}
    assert fleet_scaling.busy_seconds(spans, 1.0, 6.0) == 1.0 + 4.0 + 2.0


def test_api_load_serves_polling_at_a_fixed_rate() -> None:
    data = api_load.run_load((("full", 20.0, 0.5), ("dashboard", 20.0, 0.5)))
    full, dashboard = data["rows"]
    assert full["requests"] == 10 and full["errors"] == 0 and full["not_modified"] == 0
    assert full["p50_ms"] > 0 and data["events_in_job"] > 0
    # 9 in 10 dashboard polls send a current ETag and get 304, without a body
    assert dashboard["errors"] == 0 and dashboard["not_modified"] == 9
    assert full["server_cpu_ms_per_request"] > 0 and full["client_cpu_ms_per_request"] >= 0
    assert data["server_tracebacks"] == 0
    text = api_load.section(data)
    assert "| dashboard | 20 |" in text and "not evaluated" in text


def test_sections_are_replaced_in_place_and_summary_goes_on_top(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"
    md.write_text("# Benchmark results\n\n<!-- policy-benchmark:begin -->\nkept\n"
                  "<!-- policy-benchmark:end -->\n")
    write_section("api-load", "first", md)
    write_section("api-load", "second", md)
    write_section("bench-run", "summary", md, at_top=True)
    text = md.read_text()
    begin, _ = markers("api-load")
    assert text.count(begin) == 1 and "second" in text and "first" not in text
    assert text.index("summary") < text.index("kept") < text.index("second")


def test_the_index_names_each_sections_date_machine_and_commit(tmp_path: Path) -> None:
    md = tmp_path / "RESULTS.md"  # outside the repository: no commit to fall back on
    md.write_text("# Benchmark results\n")
    write_section("api-load", "## API load\n\nMachine: AMD EPYC, 2 cores, 24 GiB RAM; load "
                  "average 1/1/1 (1/5/15 min) at 2026-11-28 18:01 UTC; commit 82359fb.", md)
    write_section("policy-benchmark", "## Policy benchmark\n\nno machine line", md)
    text = md.read_text()
    assert text.index("## Sections") < text.index("## API load")
    assert "| API load | 2026-11-28 18:01 UTC | AMD EPYC, 2 cores | 82359fb |" in text
    assert "| Policy benchmark | - | - | unknown |" in text
    assert text.count(markers("index")[0]) == 1


def test_percentile_is_in_milliseconds() -> None:
    assert percentile_ms([0.001, 0.002, 0.003], 50) == 2.0
    assert percentile_ms([], 99) != percentile_ms([], 99)  # nan when there is no sample


def test_the_machine_line_states_the_machines_python_speed() -> None:
    line = machine_line()
    assert "Python reference loop (1,000,000 integer additions, best of 5)" in line
    assert "load average" in line
    assert re.search(r"; commit ([0-9a-f]{7,}|unknown)( with uncommitted changes)?\.$", line)
    assert 0 < python_reference_ms(repeats=1) < 60_000
