"""The generator registry: each name builds its generator; the package loads neither library."""

from __future__ import annotations

import subprocess
import sys

from kernelband.config import Settings
from kernelband.generate.registry import GENERATORS, generator_name, make_generator
from kernelband.generate.rules.generator import RulesGenerator


def test_settings_without_a_model_get_the_rules_generator() -> None:
    settings = Settings(llm_model="")
    assert generator_name(settings) == "rules"
    assert isinstance(make_generator(settings), RulesGenerator)
    assert set(GENERATORS) == {"rules", "llm"}


def test_a_configured_model_selects_the_llm_generator() -> None:
    assert generator_name(Settings(llm_model="openai/gpt-4o-mini")) == "llm"


def test_importing_the_package_loads_neither_generator_library() -> None:
    code = ("import sys, kernelband.generate; "
            "print(sorted(m for m in ('libcst', 'litellm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
