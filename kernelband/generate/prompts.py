"""The messages of a generation request: a fresh prompt, a translation, or a repair turn."""

from __future__ import annotations

from kernelband.generate.example_bank import Example, retrieve_example
from kernelband.generate.messages import GenerationRequest
from kernelband.generate.repair import repair_messages
from kernelband.generate.strategies import get_strategy, read_prompt_file
from kernelband.generate.templates import GENERIC_TARGET, Prompt, render_template
from kernelband.generate.translate import render_translate_prompt


def request_messages(request: GenerationRequest) -> list[dict[str, str]]:
    """The chat messages to send: a fresh prompt, or a repair turn continuing a conversation."""
    if request.repair is None and request.step == "translate":
        return render_translate_prompt(request).messages()
    if request.repair is None:
        return render_prompt(request).messages()
    turn = request.repair
    return repair_messages(list(turn.conversation), turn.reply, turn.feedback, turn.turn,
                           request.problem.entry)


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def render_prompt(request: GenerationRequest, target_description: str = GENERIC_TARGET) -> Prompt:
    """Render the prompt; it holds public cases only (held-out cases never reach a generator)."""
    problem = request.problem
    if request.strategy is None:
        name, target, instructions = "free", "", read_prompt_file("free.md")
    else:
        strategy = get_strategy(request.strategy)
        name, target = strategy.name, f"{strategy.target_name} ({strategy.description})"
        instructions = strategy.instructions()
    example = _example(request)
    public_cases = [c for c in problem.cases if not c.held_out]
    user = render_template(
        "user.md.j2",
        problem_name=problem.name,
        strategy_name=name,
        strategy_target=target,
        entry=problem.entry,
        kernel_names=problem.kernel_names,
        description=problem.description,
        cases=public_cases,
        profile_lines=[fact.render() for fact in request.profile_summary],
        memory_lines=list(request.memory),
        instructions=instructions.strip(),
        example=None
        if example is None
        else {
            "title": example.title,
            "before": _with_newline(example.before),
            "after": _with_newline(example.after),
        },
        parent_editable=_with_newline(request.parent_editable),
    )
    system = render_template("system.md.j2", target_description=target_description)
    return Prompt(system=system, user=user, example_id=None if example is None else example.id)


def _example(request: GenerationRequest) -> Example | None:
    """The scheduler's choice (built-in and team bank ranked together), else the built-in one."""
    chosen = request.example
    if chosen:
        return Example(id=str(chosen.get("id", "")), strategy=str(request.strategy or ""),
                       title=str(chosen.get("title", "")), before=str(chosen.get("before", "")),
                       after=str(chosen.get("after", "")))
    return retrieve_example(request.parent_editable, request.strategy)
