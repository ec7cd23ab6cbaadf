"""Strategy catalog, example bank, prompt rendering and the request/result messages."""

from __future__ import annotations

import pytest

from kernelband.generate import (
    STRATEGIES,
    GenerationRequest,
    GenerationResult,
    ProfileFact,
    get_strategy,
    render_prompt,
)
from kernelband.generate.example_bank import load_examples, retrieve_example
from kernelband.generate.strategies import UnknownStrategyError
from tests.unit.generate.gen_examples import NAMES, example_problem

FACTS = (
    ProfileFact("DRAM throughput", 38, "% of peak", "measured, ncu"),
    ProfileFact("occupancy", 50, "%", "static"),
    ProfileFact("time", 0.41, "ms", "estimated, cost model h100"),
)


def test_catalog_has_the_six_strategies_with_their_dimensions() -> None:
    targets = {name: s.target_name for name, s in STRATEGIES.items()}
    assert targets == {"tiling": "L2", "vectorization": "DRAM", "fusion": "DRAM",
                       "pipeline": "SM", "reordering": "SM", "access_layout": "DRAM"}
    assert all(s.instructions().strip() for s in STRATEGIES.values())
    with pytest.raises(UnknownStrategyError, match="choose one of tiling"):
        get_strategy("magic")


def test_example_bank_covers_every_strategy_and_retrieval_respects_the_tag() -> None:
    examples = load_examples()
    assert len(examples) >= 12
    assert {e.strategy for e in examples} == set(STRATEGIES)
    for strategy in STRATEGIES:
        found = retrieve_example("for k in range(0, K, BLOCK_K): acc += tl.dot(a, b)", strategy)
        assert found is not None and found.strategy == strategy
    matmul = retrieve_example(example_problem("matmul").editable, "tiling")
    assert matmul is not None and matmul.id == "tiling_matmul_tiles"


def test_profile_facts_render_with_their_labels() -> None:
    assert [f.render() for f in FACTS] == [
        "DRAM throughput 38% of peak (measured, ncu)",
        "occupancy 50% (static)",
        "time 0.41 ms (estimated, cost model h100)",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_prompts_hold_public_cases_and_never_held_out_ones(name: str) -> None:
    problem = example_problem(name)
    assert problem.held_out_cases, "every bundled example should have held-out cases"
    for strategy in [*STRATEGIES, None]:
        prompt = render_prompt(GenerationRequest(problem, problem.editable, strategy, FACTS, seed=1))
        text = prompt.system + prompt.user
        for case in problem.held_out_cases:
            assert case.name not in text
            for key, value in case.params.items():
                assert f"{key}={value}" not in text
        for case in problem.cases:
            assert f"`{case.name}`" in text
        assert problem.editable.strip() in text
        assert f"entry function: `{problem.entry}`" in text
        assert all(f"`{k}`" in text for k in problem.kernel_names)
        assert "DRAM throughput 38% of peak (measured, ncu)" in text
        assert f"kernelband: problem={name} strategy={strategy or 'free'}" in text
        assert "exactly one ```python fenced block" in text
        if strategy:
            assert get_strategy(strategy).instructions().strip() in text
            assert prompt.example_id is not None and prompt.example_id.startswith(strategy)


def test_request_and_result_round_trip_through_json() -> None:
    import json

    problem = example_problem("vector_add")
    request = GenerationRequest(problem, problem.editable, "tiling", FACTS, seed=7)
    assert GenerationRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    result = GenerationResult(ok=False, reason="no_code_block", message="m", prompt_tokens=3,
                              cost_known=False, model="openai/x", notes=("a",))
    assert GenerationResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
