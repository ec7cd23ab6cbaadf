"""LLM generator through litellm: retries on transient errors, a concurrency cap, cost accounting."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from kernelband.config import Settings
from kernelband.generate.base import Generator
from kernelband.generate.budget import BudgetGuard, estimate_cost, load_litellm, price_tokens
from kernelband.generate.extract import extract_code
from kernelband.generate.messages import GenerationRequest, GenerationResult
from kernelband.generate.prompts import request_messages
from kernelband.generate.scrub import scrub, scrub_messages

log = logging.getLogger(__name__)
litellm: Any = load_litellm()
litellm.suppress_debug_info = True  # its debug banners can echo request parameters

TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


def _missing_key(exc: BaseException) -> bool:
    # litellm reports a client without credentials as a 500; it is a setup error, not transient
    return "Missing credentials" in str(exc)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: rate limits, server errors, timeouts, lost connections."""
    if _missing_key(exc):
        return False
    if isinstance(exc, litellm.Timeout | litellm.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in TRANSIENT_STATUS or status >= 500)


def failure_reason(exc: BaseException) -> str:
    """Machine-readable reason for a failed call: rate_limited, server_error:503, timeout, ..."""
    status = getattr(exc, "status_code", None)
    if _missing_key(exc):
        return "auth_error:missing_key"
    if isinstance(exc, litellm.Timeout):
        return "timeout"
    if status == 429:
        return "rate_limited"
    if isinstance(status, int) and status >= 500:
        return f"server_error:{status}"
    if isinstance(exc, litellm.APIConnectionError):
        return "connection_error"
    if status in (401, 403):
        return f"auth_error:{status}"
    return f"client_error:{status}" if isinstance(status, int) else f"error:{type(exc).__name__}"


class LLMGenerator(Generator):
    """Asks any litellm model for a rewrite; tokens and USD come from the provider's usage."""

    name = "llm"

    def __init__(
        self,
        model: str,
        *,
        api_base: str = "",
        api_key: str = "",
        timeout_s: float = 120.0,
        max_retries: int = 3,
        concurrency: int = 4,
        backoff_base_s: float = 1.0,
        max_completion_tokens: int = 8192,
    ) -> None:
        if not model:
            raise ValueError("LLMGenerator needs a litellm model string, e.g. 'openai/gpt-4o-mini'")
        self.model = model
        self._api_base = api_base or None
        self._api_key = api_key or None
        self._timeout_s = timeout_s
        self._max_retries = max(0, max_retries)
        self._backoff_base_s = backoff_base_s
        self._max_completion_tokens = max_completion_tokens
        self._slots = threading.BoundedSemaphore(max(1, concurrency))

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> LLMGenerator:
        """A generator configured from the one Settings object."""
        options: dict[str, Any] = {
            "api_base": settings.llm_api_base,
            "api_key": settings.llm_api_key.get_secret_value(),
            "timeout_s": settings.llm_timeout_s,
            "max_retries": settings.llm_max_retries,
            "concurrency": settings.llm_concurrency,
        }
        options.update(overrides)
        return cls(settings.llm_model, **options)

    def __repr__(self) -> str:  # never show the key
        return f"LLMGenerator(model={self.model!r}, api_base={self._api_base!r})"

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def estimate(self, request: GenerationRequest) -> Any:
        """Estimated tokens and USD of `request` before sending it (for the scheduler's budget)."""
        messages = request_messages(request)
        return estimate_cost(self.model, messages, self._max_completion_tokens)

    def _call(self, messages: list[dict[str, str]]) -> Any:
        with self._slots:  # the concurrency cap holds across threads sharing this generator
            return litellm.completion(
                model=self.model,
                messages=messages,
                api_base=self._api_base,
                api_key=self._api_key,
                timeout=self._timeout_s,
                max_tokens=self._max_completion_tokens,
                num_retries=0,  # retries are ours (tenacity), so attempt counts are exact
                max_retries=0,
            )

    def _call_with_retries(self, messages: list[dict[str, str]]) -> tuple[Any, int]:
        attempts = 0
        for attempt in Retrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=wait_exponential(multiplier=self._backoff_base_s, max=60 * self._backoff_base_s),
            retry=retry_if_exception(is_transient),
            reraise=True,
        ):
            with attempt:
                attempts = attempt.retry_state.attempt_number
                return self._call(messages), attempts
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    def generate(
        self, request: GenerationRequest, budget: BudgetGuard | None = None
    ) -> GenerationResult:
        """One rewrite of the request's parent; failures are results with a reason, not raises."""
        messages = request_messages(request)
        base: dict[str, Any] = {"model": self.model, "strategy": request.strategy,
                                "messages": tuple(scrub_messages(messages, self._secrets()))}
        if budget is not None:
            estimate = estimate_cost(self.model, messages, self._max_completion_tokens)
            if not budget.allows(estimate):
                return GenerationResult(
                    ok=False, reason="budget_exhausted", message=budget.explain(estimate), **base
                )
        started = time.monotonic()
        try:
            response, attempts = self._call_with_retries(messages)
        except Exception as exc:  # every provider error becomes a labelled failure
            tries = self._max_retries + 1 if is_transient(exc) else 1
            message = self._redact(f"{type(exc).__name__}: {exc}")[:500]
            if _missing_key(exc):
                message = "no API key for this model: set KERNELBAND_LLM_API_KEY (any value for a local server)"
            log.warning("generation failed after %d attempt(s): %s", tries, message)
            return GenerationResult(
                ok=False, reason=failure_reason(exc), message=message,
                latency_s=time.monotonic() - started, attempts=tries, **base,
            )
        return self._result(request, response, attempts, time.monotonic() - started, base)

    def _secrets(self) -> list[str]:
        return [self._api_key] if self._api_key else []

    def _result(
        self, request: GenerationRequest, response: Any, attempts: int, latency_s: float,
        base: dict[str, Any],
    ) -> GenerationResult:
        choice = response.choices[0]
        reply = choice.message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost_usd, cost_known = self._cost(response, prompt_tokens, completion_tokens)
        extraction = extract_code(reply, request.problem.entry, choice.finish_reason)
        unchanged = extraction.ok and extraction.code.strip() == request.parent_editable.strip()
        return GenerationResult(
            ok=extraction.ok and not unchanged,
            editable=extraction.code,
            reason="unchanged_code" if unchanged else extraction.reason,
            message="the reply repeats the parent unchanged" if unchanged else extraction.message,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost_usd,
            cost_known=cost_known,
            latency_s=latency_s,
            attempts=attempts,
            reply=scrub(reply, self._secrets()),
            **base,
        )

    def _cost(self, response: Any, prompt_tokens: int, completion_tokens: int) -> tuple[float, bool]:
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.model)), True
        except Exception:  # unknown price: fall back to the per-token table, else tokens only
            return price_tokens(self.model, prompt_tokens, completion_tokens)
