"""The translate prompt (a KernelBench file as published), class entries in replies, and the
rules generator's refusal to translate."""

from __future__ import annotations

from kernelband.generate.extract import check_region
from kernelband.generate.messages import GenerationRequest
from kernelband.generate.prompts import request_messages
from kernelband.generate.rules.generator import RulesGenerator
from kernelband.problem.model import Case, KernelProblem
from kernelband.problem.translate import with_placeholder

PUBLISHED = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
             "    def forward(self, x):\n        return torch.tanh(x)\n")
REGION = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr):\n"
          "    pass\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
          "        return x\n")


def _request(strategy: str | None = "fusion") -> GenerationRequest:
    source, region = with_placeholder(PUBLISHED)
    problem = KernelProblem(name="tanh", format="kernelbench", source=source, editable=region,
                            entry="ModelNew", kernel_names=(), cases=(Case("default"),),
                            held_out_cases=(Case("secret", held_out=True),),
                            needs_translation=True)
    return GenerationRequest(problem=problem, parent_editable=region, strategy=strategy,
                             memory=("earlier translation #3: rejected: wrong_result",),
                             step="translate")


def test_translate_prompt_shows_the_pytorch_source_and_not_the_placeholder() -> None:
    system, user = (m["content"] for m in request_messages(_request()))
    assert "translates PyTorch models into Triton" in system
    assert user.startswith("<!-- kernelband: problem=tanh strategy=translate -->")
    assert "return torch.tanh(x)" in user and "Placeholder" not in user
    assert "kernelband: editable" not in user and "secret" not in user
    assert "**fusion** strategy" in user and "earlier translation #3" in user


def test_translate_prompt_without_a_strategy_has_no_direction() -> None:
    user = request_messages(_request(None))[1]["content"]
    assert "A direction" not in user


def test_request_round_trips_its_step() -> None:
    request = _request()
    assert GenerationRequest.from_dict(request.to_dict()).step == "translate"


def test_a_class_entry_with_a_kernel_is_accepted() -> None:
    assert check_region(REGION, "ModelNew").ok
    assert check_region(REGION, "Other").reason == "missing_entry:Other"


def test_rules_generator_refuses_to_translate() -> None:
    result = RulesGenerator().generate(_request())
    assert not result.ok and result.reason == "translate_needs_llm"
