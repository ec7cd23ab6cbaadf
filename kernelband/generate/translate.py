"""The translate prompt: the first Triton `ModelNew` of a KernelBench file as published.

A track of such a problem starts from a placeholder (the PyTorch Model itself); every pull
whose parent is still that placeholder asks the LLM for a translation instead of a rewrite
(kernelband/problem/translate.py). The strategy the bandit chose is passed on as a direction
for the translation, so the pull's reward still says something about its arm.
"""

from __future__ import annotations

from kernelband.generate.messages import GenerationRequest
from kernelband.generate.strategies import get_strategy
from kernelband.generate.templates import GENERIC_TARGET, Prompt, render_template
from kernelband.problem.translate import published_source


def render_translate_prompt(request: GenerationRequest,
                            target_description: str = GENERIC_TARGET) -> Prompt:
    """System and user messages asking for a Triton `ModelNew` from the PyTorch source."""
    problem = request.problem
    strategy = get_strategy(request.strategy) if request.strategy else None
    source = published_source(problem.source)
    user = render_template(
        "translate.md.j2", problem_name=problem.name, entry=problem.entry,
        model_source=source if source.endswith("\n") else source + "\n",
        description=problem.description,
        cases=[c for c in problem.cases if not c.held_out],
        strategy_name=strategy.name if strategy else "",
        strategy_target=f"{strategy.target_name}: {strategy.description}" if strategy else "",
        memory_lines=list(request.memory))
    system = render_template("translate_system.md.j2", target_description=target_description)
    return Prompt(system=system, user=user, example_id=None)
