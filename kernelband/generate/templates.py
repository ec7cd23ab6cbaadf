"""The prompt templates under prompts/ rendered with jinja2, and the chat prompt they make."""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from kernelband.generate.strategies import read_prompt_file

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
