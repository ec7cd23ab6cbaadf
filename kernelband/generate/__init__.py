"""Kernel generators: strategy catalog, prompts, the litellm generator and the rules generator."""

from kernelband.generate.base import Generator
from kernelband.generate.budget import BudgetGuard, CostEstimate, estimate_cost
from kernelband.generate.messages import GenerationRequest, GenerationResult, ProfileFact
from kernelband.generate.prompts import render_prompt
from kernelband.generate.registry import make_generator
from kernelband.generate.strategies import STRATEGIES, STRATEGY_NAMES, Strategy, get_strategy
from kernelband.generate.templates import Prompt

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
