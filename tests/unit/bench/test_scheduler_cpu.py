"""CPU per pull in the scheduler benchmarks: the scheduler's and its Postgres backends'."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from bench import fleet_scaling, scheduler_throughput
from bench.scheduler_throughput_cpu import cpu_note, postgres_cpu_s, used_between


def test_a_run_on_postgres_reports_both_processes_cpu_per_pull(
        postgres_factory: sessionmaker[Session]) -> None:
    engine = postgres_factory.kw["bind"]
    before = postgres_cpu_s(engine)
    assert before  # this machine's server: the pool's backend is read from /proc
    row = scheduler_throughput.run_config(postgres_factory, jobs=2, frontier=12, seconds=1.0)
    assert row["pulls_selected"] > 0
    assert row["scheduler_cpu_ms_per_pull"] > 0
    assert row["postgres_cpu_ms_per_pull"] is not None and row["postgres_cpu_ms_per_pull"] >= 0
    assert (used_between(before, postgres_cpu_s(engine)) or 0.0) > 0  # seeding, passes
    note = cpu_note(row)
    assert "scheduler " in note and "Postgres " in note and "reference loop" in note


def test_sqlite_has_no_backend_to_read(sqlite_factory: sessionmaker[Session]) -> None:
    row = scheduler_throughput.run_config(sqlite_factory, jobs=1, frontier=10, seconds=0.2)
    assert row["postgres_cpu_ms_per_pull"] is None and row["scheduler_cpu_ms_per_pull"] > 0
    assert "Postgres" not in cpu_note(row)


def test_backends_opened_between_readings_count_from_zero_and_closed_ones_not_at_all() -> None:
    assert used_between({1: 2.0, 2: 1.0}, {1: 2.5, 3: 0.25}) == 0.75
    assert used_between(None, {1: 1.0}) is None and used_between({1: 1.0}, None) is None


def test_the_fleet_table_shows_each_process_per_pull_and_the_scheduler_in_reference_loops() -> None:
    row = {"gpus": 10, "median_s": 1.5, "pulls_in_flight_allowed": 20, "busy_fraction": 0.99,
           "pulls_per_s": 6.4, "gpu_tasks_finished": 191, "scheduler_cpu_share": 0.2,
           "reference_ms": 40.0, "scheduler_cpu_ms_per_pull": 3.2,
           "postgres_cpu_ms_per_pull": 1.28, "fleet_cpu_ms_per_pull": None}
    data = {"label": "SIMULATED", "median_s": 1.5, "sigma": 0.3, "warmup_s": 10.0,
            "window_s": 30.0, "rows": [row]}
    assert "| 3.20 / 1.28 / - (0.080) |" in fleet_scaling.section(data)
    old = {k: v for k, v in row.items() if "cpu_ms" not in k}  # a row from an older run
    assert "| 20% | - |" in fleet_scaling.section({**data, "rows": [old]})
