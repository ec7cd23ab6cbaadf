"""The rules generator: seeded, never unchanged, safe block changes, and variants that pass the evaluator."""

from __future__ import annotations

import pytest

from kernelband.config import Settings
from kernelband.evaluate import evaluate_candidate
from kernelband.generate import GenerationRequest, make_generator
from kernelband.generate.rules.generator import RulesGenerator, candidate_variants
from tests.unit.generate.gen_examples import NAMES, example_problem

ROW_COVER = '''@triton.jit
def norm_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols)
    tl.store(out_ptr + tl.program_id(0) * n_cols + cols, x, mask=cols < n_cols)


def entry(x):
    out = torch.empty_like(x)
    BLOCK = 1024
    norm_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=BLOCK)
    return out
'''


def _request(name: str, strategy: str | None, seed: int) -> GenerationRequest:
    problem = example_problem(name)
    return GenerationRequest(problem, problem.editable, strategy, seed=seed)


def test_settings_without_model_give_the_rules_generator() -> None:
    assert isinstance(make_generator(Settings(llm_model="")), RulesGenerator)


def test_seeds_explore_distinct_variants_deterministically() -> None:
    generator = RulesGenerator()
    codes = [generator.generate(_request("vector_add", "tiling", seed)).editable for seed in range(3)]
    assert len(set(codes)) == 3
    assert codes[1] == generator.generate(_request("vector_add", "tiling", 1)).editable
    assert all(code != example_problem("vector_add").editable for code in codes)


def test_inapplicable_strategies_fail_instead_of_copying() -> None:
    for strategy in ("fusion", "access_layout"):
        result = RulesGenerator().generate(_request("vector_add", strategy, 0))
        assert not result.ok and result.reason == "no_applicable_transformation"
        assert "try another strategy" in result.message


def test_block_sizes_follow_the_grid() -> None:
    variants = dict(candidate_variants(example_problem("swiglu").editable, "tiling"))
    code = variants["tiling: BLOCK_SIZE of swiglu_kernel 64 -> 256"]
    assert "triton.cdiv(n, 256)" in code and "BLOCK_SIZE=256" in code


def test_a_block_covering_a_row_only_grows() -> None:
    sizes = [d.split("-> ")[1] for d, _ in candidate_variants(ROW_COVER, "tiling")]
    assert sizes and all(int(s) > 1024 for s in sizes)


def test_unmasked_kernels_keep_their_block_size() -> None:
    unmasked = ROW_COVER.replace(", mask=cols < n_cols", "")
    assert candidate_variants(unmasked, "tiling") == []


def test_autotune_only_when_asked_for_gpu_rules() -> None:
    code = example_problem("matmul").editable
    assert not any("autotune" in d for d, _ in candidate_variants(code, "reordering"))
    tuned = [c for d, c in candidate_variants(code, "reordering", gpu_only=True) if "autotune" in d]
    assert tuned and "num_warps=4" not in tuned[0]


@pytest.mark.parametrize("name", NAMES)
def test_three_distinct_variants_pass_the_evaluator(name: str) -> None:
    problem = example_problem(name)
    generator = RulesGenerator()
    results = [generator.generate(_request(name, strategy, seed=3))
               for strategy in ("tiling", "pipeline", "reordering", "vectorization")]
    codes = list(dict.fromkeys(r.editable for r in results if r.ok))[:3]
    assert len(codes) == 3
    for code in codes:
        verdict = evaluate_candidate(problem, code, seeds=1)
        assert verdict.correct, f"{verdict.reason}: {verdict.message}"
