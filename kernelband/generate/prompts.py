"""Prompt rendering: system + user messages from the data templates under prompts/."""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from kernelband.generate.example_bank import Example, retrieve_example
from kernelband.generate.messages import GenerationRequest
from kernelband.generate.strategies import get_strategy, read_prompt_file

_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False
)

GENERIC_TARGET = "NVIDIA data-centre and consumer GPUs (Ampere, Ada, Hopper)"


@dataclass(frozen=True)
class Prompt:
    """The chat messages of one generation request."""

    system: str
    user: str
    example_id: str | None

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def render_template(name: str, **values: object) -> str:
    """Render one template file of prompts/ with `values`."""
    return _ENV.from_string(read_prompt_file(name)).render(**values)


def request_messages(request: GenerationRequest) -> list[dict[str, str]]:
    """The chat messages to send: a fresh prompt, or a repair turn continuing a conversation."""
    if request.repair is None and request.step == "translate":
        from kernelband.generate.translate import render_translate_prompt

        return render_translate_prompt(request).messages()
    if request.repair is None:
        return render_prompt(request).messages()
    from kernelband.generate.repair import repair_messages

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
    user = _ENV.from_string(read_prompt_file("user.md.j2")).render(
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
    system = _ENV.from_string(read_prompt_file("system.md.j2")).render(
        target_description=target_description
    )
    return Prompt(system=system, user=user, example_id=None if example is None else example.id)


def _example(request: GenerationRequest) -> Example | None:
    """The scheduler's choice (built-in and team bank ranked together), else the built-in one."""
    chosen = request.example
    if chosen:
        return Example(id=str(chosen.get("id", "")), strategy=str(request.strategy or ""),
                       title=str(chosen.get("title", "")), before=str(chosen.get("before", "")),
                       after=str(chosen.get("after", "")))
    return retrieve_example(request.parent_editable, request.strategy)
