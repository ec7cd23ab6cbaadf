"""The fair-sharing order: round-robin between teams, then between jobs of a team."""

from __future__ import annotations

from kernelband.scheduling.fairshare import cap_per_team, fair_order, round_robin

# (team, job, track)
Item = tuple[int, int, int]


def _order(items: list[Item], in_flight: dict[int, int] | None = None) -> list[Item]:
    return fair_order(items, lambda i: i[0], lambda i: i[1], in_flight)


def test_round_robin_interleaves_uneven_groups() -> None:
    assert round_robin([[1, 2, 3], [4], [5, 6]]) == [1, 4, 5, 2, 6, 3]
    assert round_robin([]) == []


def test_a_big_suite_does_not_go_before_another_teams_single_job() -> None:
    suite = [(1, job, job * 10) for job in range(1, 51)]  # team 1: 50 jobs
    other = [(2, 99, 990)]
    order = _order(suite + other)
    assert order[:2] == [(1, 1, 10), (2, 99, 990)]
    assert len(order) == 51


def test_jobs_of_one_team_alternate_and_keep_their_tracks_together() -> None:
    items = [(1, 1, 11), (1, 1, 12), (1, 2, 21), (1, 2, 22), (1, 3, 31)]
    assert _order(items) == [(1, 1, 11), (1, 2, 21), (1, 3, 31), (1, 1, 12), (1, 2, 22)]


def test_team_with_fewer_attempts_in_flight_goes_first() -> None:
    items = [(1, 1, 11), (2, 2, 21), (3, 3, 31)]
    assert _order(items, {1: 5, 2: 0, 3: 2}) == [(2, 2, 21), (3, 3, 31), (1, 1, 11)]


def test_teams_and_jobs_are_ordered_by_id_not_by_arrival() -> None:
    items = [(2, 5, 51), (1, 3, 31), (2, 4, 41), (1, 3, 32)]
    expected = [(1, 3, 31), (2, 4, 41), (1, 3, 32), (2, 5, 51)]
    assert _order(items) == expected
    assert _order([items[2], items[1], items[0], items[3]]) == expected


def test_cap_drops_the_surplus_of_a_team_at_its_cap() -> None:
    ordered = [(1, 1, 11), (2, 2, 21), (1, 3, 31), (1, 4, 41)]
    kept = cap_per_team(ordered, lambda i: i[0], {1: 1}, cap=2)
    assert kept == [(1, 1, 11), (2, 2, 21)]
    assert cap_per_team(ordered, lambda i: i[0], {}, cap=None) == ordered
