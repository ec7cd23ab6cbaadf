"""Pure helpers of the scheduler benchmark: the sustained rate per window, where cProfile says
the time goes, and the head of its listing."""

from __future__ import annotations

import pstats

WINDOW_S = 5.0  # the sustained rate is reported per window of this length
WARMUP_STEPS = 3  # untimed passes first (the first parses every policy state from the database)
SUSTAINED_S = 60.0  # the largest configuration runs this long (the others `seconds`)
FLAT_WINDOW_S = 10.0  # a flat cost: the last window of this length keeps FLAT_SHARE of the first
FLAT_SHARE = 0.9
# Between passes, about every REFERENCE_EVERY_S, a small fixed Python loop is timed (best of 2;
# about 2 ms each): a window's CPU per pull divided by its median is a figure of the code, not
# of this VM, whose speed moves by a third between windows.
REFERENCE_EVERY_S, REFERENCE_ADDITIONS = 1.0, 100_000


def window_rates(marks: list[tuple[float, int]], window_s: float = WINDOW_S) -> list[float]:
    """Pulls per second in consecutive windows of `window_s` (each closed at the first pass
    that ends after it; a last partial window shorter than half a window is dropped)."""
    rates, begin, pulls_before = [], 0.0, 0
    for at, pulls in marks:
        if at - begin >= window_s:
            rates.append((pulls - pulls_before) / (at - begin))
            begin, pulls_before = at, pulls
    if marks and marks[-1][0] - begin >= window_s / 2:
        rates.append((marks[-1][1] - pulls_before) / (marks[-1][0] - begin))
    return rates


def cpu_in_references(references: list[tuple[float, float]],
                      per_pull: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(median reference ms, CPU per pull / that median) per window of `per_pull` ((window
    end, CPU ms per pull)), from the `references` (seconds in, ms) timed in that window."""
    out, begin = [], 0.0
    for end, cpu_ms in per_pull:
        inside = sorted(ms for at, ms in references if begin <= at <= end) or [float("nan")]
        out.append((inside[len(inside) // 2], cpu_ms / inside[len(inside) // 2]))
        begin = end
    return out


HOTSPOTS = {"typecast_json": "decoding JSON columns read from Postgres (policy_state and others)",
            "save_state": "saving policy state and rewriting the arm/cluster view",
            "select_for_track": "policy.select for the pulls themselves",
            "finish_tracks_and_jobs": "the per-pass budget/acceptance check over every job"}


def hotspots(stats: pstats.Stats) -> dict[str, float]:
    """Share of profiled time (cumulative) in each function named in HOTSPOTS."""
    total = stats.total_tt  # type: ignore[attr-defined]
    shares = dict.fromkeys(HOTSPOTS, 0.0)
    for (_, _, name), (_, _, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        if name in shares:
            shares[name] += cumulative / total if total else 0.0
    return shares


def trim_listing(text: str, lines: int = 30) -> str:
    """The header and first rows of a pstats listing."""
    body = [line.rstrip() for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(body) if "ncalls" in line), 0)
    return "\n".join(body[max(0, start - 2):start + lines])
