"""The generators by name, and the one the settings ask for.

`Generator` (base.py) is the interface; each factory here builds one implementation, so the
interface never imports its subclasses.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelband.config import Settings
from kernelband.generate.base import Generator

GeneratorFactory = Callable[[Settings], Generator]


def _rules(settings: Settings) -> Generator:
    # libcst takes about 0.5 s to import; the API and scheduler import this package, never it
    from kernelband.generate.rules.generator import RulesGenerator

    return RulesGenerator()


def _llm(settings: Settings) -> Generator:
    # litellm takes about 3 s to import and is absent from nodes without the `llm` extra
    from kernelband.generate.llm import LLMGenerator

    return LLMGenerator.from_settings(settings)


GENERATORS: dict[str, GeneratorFactory] = {"rules": _rules, "llm": _llm}


def generator_name(settings: Settings) -> str:
    """`llm` when a model is configured, else the offline `rules` generator."""
    return "llm" if settings.llm_model else "rules"


def make_generator(settings: Settings) -> Generator:
    """The generator the settings ask for (`generator_name`)."""
    return GENERATORS[generator_name(settings)](settings)
