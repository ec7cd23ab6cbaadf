"""LLMGenerator through litellm over real HTTP against the scripted server (no mock_response)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
from pydantic import SecretStr

from kernelband.config import Settings
from kernelband.generate import BudgetGuard, GenerationRequest, make_generator
from kernelband.generate.llm import LLMGenerator
from kernelband.problem.model import KernelProblem
from tests.unit.generate.gen_examples import example_problem
from tests.utils.fake_llm import FakeLLM, running_fake_llm

SECRET = "sk-kb-test-SECRET-9f3a71"


@pytest.fixture()
def fake() -> Iterator[FakeLLM]:
    with running_fake_llm() as server:
        yield server


@pytest.fixture(scope="module")
def problem() -> KernelProblem:
    return example_problem("vector_add")


def _generator(fake: FakeLLM, model: str = "openai/gpt-4o-mini", **overrides: object) -> LLMGenerator:
    settings = Settings(llm_model=model, llm_api_base=fake.api_base, llm_api_key=SecretStr(SECRET),
                        llm_timeout_s=10, llm_max_retries=3, llm_concurrency=2)
    generator = make_generator(settings)
    assert isinstance(generator, LLMGenerator)
    return LLMGenerator.from_settings(settings, backoff_base_s=0.01, **overrides) if overrides else \
        LLMGenerator.from_settings(settings, backoff_base_s=0.01)


def _request(problem: KernelProblem, strategy: str | None, name: str | None = None) -> GenerationRequest:
    target = replace(problem, name=name) if name else problem
    return GenerationRequest(target, problem.editable, strategy, seed=0)


def test_success_records_tokens_and_known_cost(fake: FakeLLM, problem: KernelProblem) -> None:
    result = _generator(fake).generate(_request(problem, "tiling"))
    assert result.ok, result.message
    assert "BLOCK_SIZE = 256" in result.editable and "def entry(" in result.editable
    assert result.prompt_tokens > 100 and result.completion_tokens > 50
    assert result.cost_known and result.cost_usd > 0
    assert result.attempts == 1 and result.model == "openai/gpt-4o-mini"
    assert fake.script.requests[-1] == {"problem": "vector_add", "strategy": "tiling", "has_key": True}


def test_unknown_price_keeps_tokens_only(fake: FakeLLM, problem: KernelProblem) -> None:
    result = _generator(fake, model="openai/kb-scripted-unpriced").generate(_request(problem, "tiling"))
    assert result.ok and result.prompt_tokens > 0
    assert not result.cost_known and result.cost_usd == 0.0


@pytest.mark.parametrize(("strategy", "reason"), [
    ("vectorization", "no_code_block"),
    ("fusion", "syntax_error:line 6"),
    ("pipeline", "missing_entry:entry"),
    ("reordering", "truncated_reply"),
])
def test_bad_replies_are_failures_with_reasons(fake: FakeLLM, problem: KernelProblem, strategy: str, reason: str) -> None:
    result = _generator(fake).generate(_request(problem, strategy))
    assert not result.ok and result.reason == reason
    assert result.prompt_tokens > 0 and result.attempts == 1  # tokens were spent all the same


def test_rate_limits_are_retried_until_success(fake: FakeLLM, problem: KernelProblem) -> None:
    result = _generator(fake).generate(_request(problem, "access_layout"))
    assert result.ok and result.attempts == 3
    result = _generator(fake).generate(_request(problem, None, name="flaky_429"))
    assert result.ok and result.attempts == 3  # 429, then 503, then the reply


@pytest.mark.parametrize(("name", "reason", "calls"), [
    ("always_500", "server_error:500", 4),
    ("always_429", "rate_limited", 4),
    ("denied", "auth_error:401", 1),  # not transient: no retry
])
def test_persistent_errors_are_reported_after_retries(
    fake: FakeLLM, problem: KernelProblem, name: str, reason: str, calls: int
) -> None:
    result = _generator(fake).generate(_request(problem, "tiling", name=name))
    assert not result.ok and result.reason == reason and result.attempts == calls
    assert len(fake.script.requests) == calls
    assert result.prompt_tokens == 0 and result.cost_usd == 0


def test_timeouts_are_retried_then_reported(fake: FakeLLM, problem: KernelProblem) -> None:
    generator = _generator(fake, timeout_s=0.2, max_retries=1)
    result = generator.generate(_request(problem, "tiling", name="slow"))
    assert not result.ok and result.reason == "timeout" and result.attempts == 2


def test_budget_guard_refuses_before_sending(fake: FakeLLM, problem: KernelProblem) -> None:
    generator = _generator(fake)
    request = _request(problem, "tiling")
    estimate = generator.estimate(request)
    assert estimate.prompt_tokens > 100 and estimate.usd_known
    result = generator.generate(request, budget=BudgetGuard(tokens_left=estimate.tokens - 1))
    assert not result.ok and result.reason == "budget_exhausted" and not fake.script.requests
    assert generator.generate(request, budget=BudgetGuard(usd_left=estimate.usd * 2)).ok


def test_concurrency_limit_holds_across_threads(fake: FakeLLM, problem: KernelProblem) -> None:
    generator = _generator(fake, concurrency=1)
    request = _request(problem, "tiling", name="slow")
    threads = [threading.Thread(target=generator.generate, args=(request,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake.script.requests) == 3 and fake.script.max_in_flight == 1


def test_api_key_never_leaks(
    fake: FakeLLM, problem: KernelProblem, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    generator = _generator(fake)
    texts = [repr(generator)]
    for name in ("vector_add", "denied", "always_500"):
        texts.append(str(generator.generate(_request(problem, "tiling", name=name)).to_dict()))
    from kernelband.generate import render_prompt
    prompt = render_prompt(_request(problem, "tiling"))
    captured = capsys.readouterr()
    texts += [prompt.system, prompt.user, caplog.text, captured.out, captured.err]
    assert all(SECRET not in text for text in texts)


def test_missing_key_is_a_setup_error_not_retried(fake: FakeLLM, problem: KernelProblem, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    generator = LLMGenerator("openai/gpt-4o-mini", api_base=fake.api_base, backoff_base_s=0.01)
    result = generator.generate(_request(problem, "tiling"))
    assert not result.ok and result.reason == "auth_error:missing_key" and result.attempts == 1
    assert "KERNELBAND_LLM_API_KEY" in result.message
