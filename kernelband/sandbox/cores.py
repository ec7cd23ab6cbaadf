"""Which of a node's cores measure and which do everything else.

A launch-bound kernel's time is partly CPU time (the launches), so the runners that time
candidates run on cores of their own, and every other sandboxed child (compiles, correctness
runs, Nsight Compute passes) runs on the rest. `KERNELBAND_MEASURE_CORES`: `auto` (default:
on a GPU node with at least AUTO_MIN_CORES cores, one of the last cores; elsewhere none), a
list such as `0-3,8`, or empty/`none` for no pinning.

On a host with several GPUs, one worker per GPU (each with `CUDA_VISIBLE_DEVICES` naming its
GPU) and no affinity masks of their own, `auto` keeps the last core per GPU for measuring and
gives GPU i the i-th of them counted from the end: two workers that both took the last core
would time their candidates on one core, each slowing the other's launches.
"""

from __future__ import annotations

import glob
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


def host_gpus() -> int:
    """How many GPUs this host has (its /dev/nvidiaN device files), whatever this process sees."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def gpu_index(visible: str | None = None) -> int:
    """This process's GPU among the host's: the first entry of CUDA_VISIBLE_DEVICES when it is a
    number, else 0 (a UUID or nothing set)."""
    first = (os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible).split(",")[0]
    return int(first) if first.strip().isdigit() else 0


def _auto(available: list[int], gpus: int, index: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`auto` on a GPU node: (this GPU's measuring core, every GPU's measuring cores)."""
    kept = available[-max(1, gpus):] if len(available) - max(1, gpus) >= AUTO_MIN_CORES - 1 else available[-1:]
    return (kept[-1 - index % len(kept)],), tuple(kept)


def measuring_cores(setting: str, device: str, *, available: list[int] | None = None,
                    gpus: int | None = None, index: int | None = None) -> tuple[int, ...]:
    """The cores the measuring runners are pinned to (empty: not pinned)."""
    text = setting.strip().lower()
    if text in ("", "none", "off"):
        return ()
    if text == "auto":
        cores = sorted(os.sched_getaffinity(0)) if available is None else sorted(available)
        if not device.startswith("cuda") or len(cores) < AUTO_MIN_CORES:
            return ()
        return _auto(cores, host_gpus() if gpus is None else gpus, gpu_index() if index is None else index)[0]
    return parse_cores(setting)


def other_cores(measuring: tuple[int, ...], setting: str = "", *, available: list[int] | None = None,
                gpus: int | None = None) -> tuple[int, ...]:
    """The cores every other child runs on: this process's cores minus the measuring ones, and
    with `auto` minus every GPU's measuring core of the host (empty, meaning no change, when
    nothing is left or nothing measures)."""
    cores = sorted(os.sched_getaffinity(0)) if available is None else sorted(available)
    taken = set(measuring)
    if measuring and setting.strip().lower() == "auto":
        taken |= set(_auto(cores, host_gpus() if gpus is None else gpus, 0)[1])
    rest = [c for c in cores if c not in taken]
    return tuple(rest) if measuring and rest else ()
