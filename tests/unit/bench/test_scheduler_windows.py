"""The scheduler benchmark's per-window figures cover the same windows as its rates."""

from __future__ import annotations

import os

from bench.scheduler_stats import window_rates
from bench.scheduler_throughput import Timings, cpu_per_pull, postgres_per_pull


def _run(ends: list[float], pulls_per_pass: int, cpu_per_pass: float) -> Timings:
    t = Timings()
    for number, at in enumerate(ends, start=1):
        t.marks.append((at, number * pulls_per_pass))
        t.cpu_marks.append((number * pulls_per_pass, number * cpu_per_pass))
    return t


def test_a_run_stopping_just_short_of_its_last_window_reports_that_windows_cpu() -> None:
    # passes every 1 s, the last one 9.99 s after the second window closed: the rates
    # count it, and so must the CPU per pull
    t = _run([float(s) for s in range(1, 21)] + [29.99], pulls_per_pass=10, cpu_per_pass=0.01)
    t.cpu_marks[-1] = (t.cpu_marks[-1][0], t.cpu_marks[-2][1] + 0.02)  # a slower last pass
    assert len(window_rates(t.marks, 10.0)) == 3
    windows = cpu_per_pull(t, 10.0)
    assert [round(at, 2) for at, _ in windows] == [10.0, 20.0, 29.99]
    assert [round(ms, 3) for _, ms in windows] == [1.0, 1.0, 2.0]


def test_a_last_window_under_half_a_window_is_left_out_as_the_rates_leave_it() -> None:
    t = _run([float(s) for s in range(1, 24)], pulls_per_pass=10, cpu_per_pass=0.01)
    assert len(window_rates(t.marks, 10.0)) == len(cpu_per_pull(t, 10.0)) == 2


def test_postgres_cpu_per_pull_per_window_from_the_readings_once_a_second() -> None:
    marks = [(float(s), 100 * s, 0.05 * s) for s in range(1, 21)] + [(29.5, 2500, 1.5)]
    assert [round(ms, 3) for ms in postgres_per_pull(marks, 10.0)] == [0.5, 0.5, 1.0]
    assert postgres_per_pull([], 10.0) == []


def test_a_backend_gone_between_listing_and_reading_is_skipped(monkeypatch) -> None:
    from sqlalchemy import create_engine

    from bench import scheduler_throughput_cpu

    class Listing:
        def __enter__(self) -> Listing:
            return self

        def __exit__(self, *_: object) -> None:
            return None

        def execute(self, _query: object) -> Listing:
            return self

        def scalars(self) -> list[int]:
            return [os.getpid(), 2**22 + 1]  # this process, and a pid that is not there

    engine = create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    monkeypatch.setattr(type(engine), "connect", lambda self: Listing())
    seconds = scheduler_throughput_cpu.postgres_cpu_s(engine)
    assert seconds is not None and list(seconds) == [os.getpid()]
