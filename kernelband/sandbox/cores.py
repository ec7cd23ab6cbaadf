"""Which of a node's cores measure and which do everything else.

A launch-bound kernel's time is partly CPU time (the launches), so the runners that time
candidates run on cores of their own, and every other sandboxed child (compiles, correctness
runs, Nsight Compute passes) runs on the rest. `KERNELBAND_MEASURE_CORES`: `auto` (default:
on a GPU node with at least AUTO_MIN_CORES cores, the last core; elsewhere none), a list such
as `0-3,8`, or empty/`none` for no pinning.
"""

from __future__ import annotations

import os

AUTO_MIN_CORES = 4  # below this a core of its own would starve the rest


def parse_cores(text: str) -> tuple[int, ...]:
    """`"0-3,8"` -> (0, 1, 2, 3, 8); empty text: no pinning."""
    cores: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        try:
            cores.update(range(int(low), int(high or low) + 1))
        except ValueError:
            raise ValueError(f"KERNELBAND_MEASURE_CORES={text!r}: write cores as '0-3,8', 'auto' or 'none'") from None
    return tuple(sorted(cores))


def measuring_cores(setting: str, device: str) -> tuple[int, ...]:
    """The cores the measuring runners are pinned to (empty: not pinned)."""
    text = setting.strip().lower()
    if text in ("", "none", "off"):
        return ()
    if text == "auto":
        available = sorted(os.sched_getaffinity(0))
        return (available[-1],) if device.startswith("cuda") and len(available) >= AUTO_MIN_CORES else ()
    return parse_cores(setting)


def other_cores(measuring: tuple[int, ...]) -> tuple[int, ...]:
    """The cores every other child runs on: this process's cores minus the measuring ones
    (empty, meaning no change, when nothing is left or nothing measures)."""
    rest = sorted(set(os.sched_getaffinity(0)) - set(measuring))
    return tuple(rest) if measuring and rest else ()
