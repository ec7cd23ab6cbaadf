"""The offline rules generator: deterministic, seeded source rewrites per strategy."""

from __future__ import annotations

import random
import time
from typing import Any

import libcst as cst

from kernelband.generate.base import Generator
from kernelband.generate.extract import check_region
from kernelband.generate.messages import GenerationRequest, GenerationResult
from kernelband.generate.rules.analysis import analyse
from kernelband.generate.rules.options import BUILDERS, Option, gpu_reordering
from kernelband.generate.strategies import get_strategy

RULES_MODEL = "rules"


def candidate_variants(
    code: str, strategy: str | None, inplace: bool = False, gpu_only: bool = False
) -> list[tuple[str, str]]:
    """Every distinct, changed (description, code) the strategy's rules produce for `code`."""
    names = list(BUILDERS) if strategy is None else [get_strategy(strategy).name]
    builders = {**BUILDERS, "reordering": gpu_reordering} if gpu_only else BUILDERS
    region = analyse(code)
    options: list[Option] = [o for name in names for o in builders[name](region, code, inplace)]
    seen = {code}
    variants: list[tuple[str, str]] = []
    for option in options:
        new_code = option.edit(region.module).code
        if new_code not in seen:
            seen.add(new_code)
            variants.append((option.description, new_code))
    return variants


class RulesGenerator(Generator):
    """Applies one seeded rule of the requested strategy; never returns an unchanged copy.

    `gpu_only=True` adds rewrites that only a GPU can run (autotune wraps).
    """

    name = RULES_MODEL

    def __init__(self, gpu_only: bool = False) -> None:
        self.gpu_only = gpu_only

    def generate(self, request: GenerationRequest) -> GenerationResult:
        started = time.monotonic()
        base: dict[str, Any] = {"model": RULES_MODEL, "strategy": request.strategy, "cost_known": True, "attempts": 1}
        if request.step == "translate":  # submissions are refused first; this guards old jobs
            return GenerationResult(ok=False, reason="translate_needs_llm",
                                    message="the rules generator cannot translate PyTorch into "
                                    "Triton; run the job with an LLM model", **base)
        try:
            variants = candidate_variants(
                request.parent_editable, request.strategy, bool(request.problem.inplace_outputs),
                self.gpu_only,
            )
        except cst.ParserSyntaxError as exc:
            return GenerationResult(ok=False, reason="syntax_error:parent",
                                    message=f"the parent does not parse: {exc.message}", **base)
        variants = [v for v in variants if check_region(v[1], request.problem.entry).ok]
        if not variants:
            return GenerationResult(
                ok=False, reason="no_applicable_transformation",
                message=f"no {request.strategy or 'rule-based'} rewrite applies to this kernel; "
                "try another strategy or configure an LLM (KERNELBAND_LLM_MODEL)",
                latency_s=time.monotonic() - started, **base,
            )
        # a fixed shuffle per strategy, then seed i takes slot i: consecutive seeds differ
        random.Random(f"{request.strategy}:{len(variants)}").shuffle(variants)
        description, code = variants[request.seed % len(variants)]
        return GenerationResult(ok=True, editable=code, latency_s=time.monotonic() - started,
                                notes=(description,), **base)
