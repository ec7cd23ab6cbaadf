"""Kernel generators: strategy catalog, prompts, the litellm generator and the rules generator."""

from kernelband.generate.base import Generator, make_generator
from kernelband.generate.budget import BudgetGuard, CostEstimate, estimate_cost
from kernelband.generate.messages import GenerationRequest, GenerationResult, ProfileFact
from kernelband.generate.prompts import Prompt, render_prompt
from kernelband.generate.strategies import STRATEGIES, STRATEGY_NAMES, Strategy, get_strategy

__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "BudgetGuard",
    "CostEstimate",
    "GenerationRequest",
    "GenerationResult",
    "Generator",
    "ProfileFact",
    "Prompt",
    "Strategy",
    "estimate_cost",
    "get_strategy",
    "make_generator",
    "render_prompt",
]
