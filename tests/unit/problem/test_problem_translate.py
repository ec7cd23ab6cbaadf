"""KernelBench files as published: recognised from their text, given a placeholder region,
refused at once without an LLM model (kernelband/problem/translate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelband.problem.editable import BEGIN_MARKER, extract_region
from kernelband.problem.translate import (
    NEEDS_LLM,
    PLACEHOLDER_REGION,
    is_published_kernelbench,
    published_source,
    suite_translation_refusal,
    translation_refusal,
    with_placeholder,
)
from kernelband.sandbox import load_problem_sandboxed

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT.parent / "shared" / "corpus" / "kernelbench" / "level1"
SHIPPED = ROOT / "kernelband" / "examples" / "kernelbench" / "relu.py"
PUBLISHED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


batch_size = 4
dim = 33


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_published_files_are_told_apart_from_files_with_a_modelnew() -> None:
    assert is_published_kernelbench(PUBLISHED, "kernelbench")
    assert not is_published_kernelbench(PUBLISHED, "native")
    assert not is_published_kernelbench(SHIPPED.read_text(), "kernelbench")


def test_placeholder_region_is_appended_and_cut_off_again() -> None:
    source, region = with_placeholder(PUBLISHED)
    assert region == PLACEHOLDER_REGION and extract_region(source, "kernelbench") == region
    assert source.index("class Model(") < source.index(BEGIN_MARKER)
    assert published_source(source) == PUBLISHED


def test_without_a_model_the_submission_is_refused_with_how_to_set_one() -> None:
    reason = translation_refusal(PUBLISHED, "kernelbench", "")
    assert reason == NEEDS_LLM and "--model" in reason and "generator.model" in reason
    assert translation_refusal(PUBLISHED, "kernelbench", "openai/gpt-4o-mini") is None
    assert translation_refusal(SHIPPED.read_text(), "kernelbench", "") is None


def test_a_suite_with_published_files_and_no_model_is_refused_naming_them() -> None:
    named = [("tanh", PUBLISHED), ("relu", SHIPPED.read_text())]
    reason = suite_translation_refusal(named, "kernelbench", "")
    assert reason is not None and reason.startswith("1 of 2 files (tanh) need translation")
    assert suite_translation_refusal(named, "kernelbench", "openai/x") is None


def test_published_file_loads_with_model_as_reference() -> None:
    problem = load_problem_sandboxed(PUBLISHED, "kernelbench", "tanh")
    assert problem.needs_translation and problem.editable == PLACEHOLDER_REGION
    assert [c.name for c in problem.held_out_cases] == ["held_out_batch"]


def test_a_corpus_file_loads_as_published() -> None:
    path = CORPUS / "19_ReLU.py"
    if not path.is_file():
        pytest.skip(f"the KernelBench corpus is not at {CORPUS}")
    source = path.read_text().replace("4096", "8").replace("393216", "64")  # CPU-sized
    problem = load_problem_sandboxed(source, "kernelbench", "19_ReLU")
    assert problem.needs_translation and published_source(problem.source) == source.rstrip("\n") + "\n"
