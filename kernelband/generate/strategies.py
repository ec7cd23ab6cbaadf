"""The six optimization strategies of KernelBand v2 and the hardware dimension each targets."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

# Hardware dimensions, as indexed in the signature h(k): SM compute, DRAM bandwidth, L2 locality.
SM, DRAM, L2 = 0, 1, 2
DIMENSION_NAMES: tuple[str, ...] = ("SM", "DRAM", "L2")


@dataclass(frozen=True)
class Strategy:
    """One arm family: what it asks a generator to do and which dimension it attacks."""

    name: str
    target: int
    description: str

    @property
    def target_name(self) -> str:
        return DIMENSION_NAMES[self.target]

    def instructions(self) -> str:
        """The strategy's prompt instructions, read from its data file."""
        return read_prompt_file(f"{self.name}.md")


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("tiling", L2, "block/tile sizes and blocking for cache reuse"),
        Strategy("vectorization", DRAM, "wider loads/stores, contiguity hints, cheaper dtypes"),
        Strategy("fusion", DRAM, "fuse operations and passes to cut memory traffic"),
        Strategy("pipeline", SM, "software pipelining (num_stages), latency hiding, loops"),
        Strategy("reordering", SM, "launch/grid order, num_warps, autotuning"),
        Strategy("access_layout", DRAM, "coalescing, data layout, strides, block pointers"),
    )
}
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


class UnknownStrategyError(ValueError):
    """A strategy name outside the catalog."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown strategy {name!r}: choose one of {', '.join(STRATEGY_NAMES)}"
        )


def get_strategy(name: str) -> Strategy:
    """The catalog entry for `name`, or an error listing the valid names."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UnknownStrategyError(name) from None


def read_prompt_file(filename: str) -> str:
    """Text of a packaged prompt data file under kernelband/generate/prompts/."""
    return resources.files("kernelband.generate").joinpath("prompts", filename).read_text("utf-8")
