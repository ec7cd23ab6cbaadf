"""The generator interface; kernelband/generate/registry.py builds the implementations."""

from __future__ import annotations

from kernelband.generate.messages import GenerationRequest, GenerationResult


class Generator:
    """Writes one child kernel from (parent, strategy). Subclass to plug in a new generator."""

    name = "base"

    def generate(self, request: GenerationRequest) -> GenerationResult:
        raise NotImplementedError("Must provide generate(request) -> GenerationResult")
