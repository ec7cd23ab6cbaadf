"""Fair sharing of the fleet: the order in which the scheduler serves tracks each cycle.

Pure functions, no I/O. Rule: round-robin between teams (the team with the fewest attempts in
flight first, ties by team id), then round-robin between the jobs of a team (oldest job first),
so a suite of fifty jobs gets one slot per turn like a team with one job. An optional per-team
cap on in-flight attempts drops the surplus of a team that already holds its share.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def round_robin(groups: Sequence[Sequence[T]]) -> list[T]:
    """Interleave groups: first item of each group, then the second of each, and so on."""
    out: list[T] = []
    depth = max((len(g) for g in groups), default=0)
    for index in range(depth):
        out.extend(group[index] for group in groups if index < len(group))
    return out


def _group(items: Sequence[T], key: Callable[[T], int]) -> OrderedDict[int, list[T]]:
    groups: OrderedDict[int, list[T]] = OrderedDict()
    for item in sorted(items, key=key):  # stable: keeps the caller's order inside a group
        groups.setdefault(key(item), []).append(item)
    return groups


def fair_order(items: Sequence[T], team_of: Callable[[T], int], job_of: Callable[[T], int],
               in_flight_by_team: Mapping[int, int] | None = None) -> list[T]:
    """Items (tracks) ordered round-robin between teams, then between jobs of a team."""
    in_flight = in_flight_by_team or {}
    per_team: list[tuple[int, int, list[T]]] = []
    for team, team_items in _group(items, team_of).items():
        jobs = _group(team_items, job_of)
        per_team.append((in_flight.get(team, 0), team, round_robin(list(jobs.values()))))
    per_team.sort(key=lambda entry: (entry[0], entry[1]))
    return round_robin([entry[2] for entry in per_team])


def cap_per_team(ordered: Sequence[T], team_of: Callable[[T], int],
                 in_flight_by_team: Mapping[int, int], cap: int | None) -> list[T]:
    """Keep the order but drop items of a team once its in-flight count reaches `cap`."""
    if cap is None:
        return list(ordered)
    counts = dict(in_flight_by_team)
    kept: list[T] = []
    for item in ordered:
        team = team_of(item)
        if counts.get(team, 0) < cap:
            kept.append(item)
            counts[team] = counts.get(team, 0) + 1
    return kept


__all__ = ["cap_per_team", "fair_order", "round_robin"]
