"""Whether a job's generator model can work, decided before any pull is spent on it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernelband.generate.budget import load_litellm

# Failure reasons of the model call itself (llm.failure_reason, after its retries): the model,
# provider, key or server is wrong or unreachable. A reply without usable code is not one of
# them (the model works). A job whose every generation failed so ends failed, not completed.
GENERATOR_CALL_FAILURES = ("auth_error", "client_error", "error:", "connection_error",
                           "timeout", "server_error", "rate_limited")


def is_fatal_generator_reason(reason: str | None) -> bool:
    """True for a generation that failed because the model could not be called."""
    return bool(reason) and str(reason).startswith(GENERATOR_CALL_FAILURES)


@lru_cache(maxsize=1)
def _litellm() -> Any:
    return load_litellm()


def model_refusal(model: str, api_base: str = "") -> str | None:
    """Why `model` cannot work with this service's litellm, or None when it may.

    Only what is knowable without calling the provider: a provider litellm does not know (or
    no provider at all). Whether the provider serves that model and accepts the key is known
    only at the first call; a job that fails that way ends `failed` with the provider's error.
    """
    if not model:
        return None
    try:
        litellm = _litellm()
    except ImportError:
        return None  # this process cannot tell; the LLM worker will
    try:
        litellm.get_llm_provider(model, api_base=api_base or None)
    except Exception as exc:  # litellm raises BadRequestError (and others) for unknown names
        if "provider" not in str(exc).lower():
            return None
        return (f"litellm knows no provider for model '{model}': write it as "
                "'<provider>/<model>' with a provider litellm supports (for example "
                "'openai/gpt-4o-mini', 'anthropic/claude-3-5-sonnet-20240620', or "
                "'openai/<name>' for an OpenAI-compatible server at KERNELBAND_LLM_API_BASE), "
                "or leave generator.model empty for the offline rules generator")
    return None
