"""Whether a job's generator model can work, decided before any pull is spent on it."""

from __future__ import annotations

import ast
import importlib.util
import json
from functools import lru_cache
from pathlib import Path

from kernelband.parse import parse

# Failure reasons of the model call itself (llm.failure_reason, after its retries): the model,
# provider, key or server is wrong or unreachable. A reply without usable code is not one of
# them (the model works). A job whose every generation failed so ends failed, not completed.
GENERATOR_CALL_FAILURES = ("auth_error", "client_error", "error:", "connection_error",
                           "timeout", "server_error", "rate_limited")


def is_fatal_generator_reason(reason: str | None) -> bool:
    """True for a generation that failed because the model could not be called."""
    return bool(reason) and str(reason).startswith(GENERATOR_CALL_FAILURES)


@lru_cache(maxsize=1)
def _litellm_names() -> tuple[frozenset[str], frozenset[str]] | None:
    """(providers, bare model names) litellm knows, read from its files without importing it:
    the import takes seconds, which an API request must not wait for. None: not installed."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    try:
        tree = parse((root / "types" / "utils.py").read_text())
        names = json.loads((root / "model_prices_and_context_window_backup.json").read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    providers = {str(st.value.value) for node in tree.body
                 if isinstance(node, ast.ClassDef) and node.name == "LlmProviders"
                 for st in node.body
                 if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant)}
    return frozenset(providers), frozenset(names)


def model_refusal(model: str, api_base: str = "") -> str | None:
    """Why `model` cannot work with this service's litellm, or None when it may.

    Only what is knowable without calling the provider: `<provider>/<model>` with a provider
    litellm does not know, or a bare name litellm cannot place with a provider (it accepts
    bare names of its price list only). Whether the provider serves that model and accepts
    the key is known only at the first call; a job that fails that way ends `failed` with the
    provider's error. `api_base` does not change this: litellm needs the provider either way.
    """
    if not model:
        return None
    known = _litellm_names()
    if known is None:
        return None  # this process cannot tell; the LLM worker will
    providers, bare_names = known
    provider, slash, _ = model.partition("/")
    if slash and provider in providers:
        return None
    if not slash and (model in bare_names or model.startswith("ft:")):
        return None
    return (f"litellm knows no provider for model '{model}': write it as "
            "'<provider>/<model>' with a provider litellm supports (for example "
            "'openai/gpt-4o-mini', 'anthropic/claude-3-5-sonnet-20240620', or "
            "'openai/<name>' for an OpenAI-compatible server at KERNELBAND_LLM_API_BASE), "
            "or leave generator.model empty for the offline rules generator")
