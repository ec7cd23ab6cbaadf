"""The SIMULATED landscapes the policy benchmark runs, by name (all simulated, none measured)."""

from __future__ import annotations

from bench.policy_bench.landscapes import Landscape, PaperLandscape
from bench.policy_bench.roofline import RooflineLandscape

SIM_LANDSCAPES: dict[str, Landscape] = {
    "paper": RooflineLandscape(),
    "paper-v0": PaperLandscape(),
    "no-structure": RooflineLandscape(name="no-structure", informative=False),
    "uniform": PaperLandscape(name="uniform", uniform=True),
}
