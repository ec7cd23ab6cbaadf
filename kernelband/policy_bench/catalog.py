"""The SIMULATED landscapes the policy benchmark runs, by name (all simulated, none measured)."""

from __future__ import annotations

from kernelband.policy_bench.families import FamiliesLandscape
from kernelband.policy_bench.landscapes import Landscape, PaperLandscape
from kernelband.policy_bench.roofline import RooflineLandscape

SIM_LANDSCAPES: dict[str, Landscape] = {
    "paper": RooflineLandscape(),
    "paper-v0": PaperLandscape(),
    "families": FamiliesLandscape(),
    "hard-to-edit": RooflineLandscape(name="hard-to-edit", edit_difficulty=0.1),
    "same-prompt": RooflineLandscape(name="same-prompt", repeat_correlation=0.8),
    "no-structure": RooflineLandscape(name="no-structure", informative=False),
    "uniform": PaperLandscape(name="uniform", uniform=True),
}
