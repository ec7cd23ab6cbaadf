"""The generator interface and the factory that picks LLM or rules from the settings."""

from __future__ import annotations

from kernelband.config import Settings
from kernelband.generate.messages import GenerationRequest, GenerationResult


class Generator:
    """Writes one child kernel from (parent, strategy). Subclass to plug in a new generator."""

    name = "base"

    def generate(self, request: GenerationRequest) -> GenerationResult:
        raise NotImplementedError("Must provide generate(request) -> GenerationResult")


def make_generator(settings: Settings) -> Generator:
    """`RulesGenerator` when no model is configured, else an `LLMGenerator` for that model."""
    if not settings.llm_model:
        from kernelband.generate.rules.generator import RulesGenerator

        return RulesGenerator()
    from kernelband.generate.llm import LLMGenerator

    return LLMGenerator.from_settings(settings)
