"""The six optimization strategies of KernelBand v2 and the hardware dimension each targets."""

from __future__ import annotations

from typing import Final

# Hardware dimensions of the signature h: throughput as % of peak.
SM: Final = 0
DRAM: Final = 1
L2: Final = 2
DIMENSION_NAMES: Final[tuple[str, ...]] = ("sm", "dram", "l2")

# Catalog order matters: arm indices and serialized arm tables follow it.
STRATEGY_TARGETS: Final[tuple[tuple[str, int], ...]] = (
    ("tiling", L2),
    ("vectorization", DRAM),
    ("fusion", DRAM),
    ("pipeline", SM),
    ("reordering", SM),
    ("access_layout", DRAM),
)
STRATEGY_NAMES: Final[tuple[str, ...]] = tuple(name for name, _ in STRATEGY_TARGETS)
TARGET_DIMENSION: Final[dict[str, int]] = dict(STRATEGY_TARGETS)

# Saturation thresholds theta_sat per dimension (paper v2): a dimension above it is not attacked.
DEFAULT_THETA_SAT: Final[tuple[float, float, float]] = (80.0, 70.0, 75.0)


def strategy_index(name: str) -> int:
    """Index of a strategy in the catalog, with a helpful error for unknown names."""
    try:
        return STRATEGY_NAMES.index(name)
    except ValueError:
        raise ValueError(
            f"kernelband: unknown strategy {name!r}; use one of {', '.join(STRATEGY_NAMES)}"
        ) from None
