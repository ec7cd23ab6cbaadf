"""Budget hooks for the scheduler: estimate a request before sending, refuse when over budget."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType


def load_litellm() -> ModuleType:
    """litellm, imported on first use: the rules generator and GPU nodes never need it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # must precede the import
    try:
        import litellm
    except ImportError as exc:
        raise ImportError(
            "litellm is not installed on this node, so it cannot call an LLM: install the "
            "project's `llm` extra (pip install 'kernelband[llm]'), or use the rules generator "
            "(an empty KERNELBAND_LLM_MODEL)"
        ) from exc

    return litellm


@dataclass(frozen=True)
class CostEstimate:
    """Upper-bound-ish cost of one request (estimated, before sending)."""

    prompt_tokens: int
    max_completion_tokens: int
    usd: float
    usd_known: bool

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.max_completion_tokens


@dataclass(frozen=True)
class BudgetGuard:
    """What is left of a job's LLM budget; None means unlimited."""

    tokens_left: int | None = None
    usd_left: float | None = None

    def allows(self, estimate: CostEstimate) -> bool:
        """True when the estimated request fits in what is left."""
        if self.tokens_left is not None and estimate.tokens > self.tokens_left:
            return False
        # an unknown price cannot be checked against a USD budget; tokens still bound it
        return not (
            self.usd_left is not None and estimate.usd_known and estimate.usd > self.usd_left
        )

    def explain(self, estimate: CostEstimate) -> str:
        """Why `allows` refused, in words."""
        return (
            f"estimated {estimate.tokens} tokens / ${estimate.usd:.4f} but only "
            f"{self.tokens_left if self.tokens_left is not None else 'unlimited'} tokens / "
            f"${self.usd_left if self.usd_left is not None else 'unlimited'} left in the job's budget"
        )


def count_prompt_tokens(model: str, messages: list[dict[str, str]]) -> int:
    """Prompt tokens by litellm's tokenizer for `model` (chars/4 if it has none)."""
    try:
        return int(load_litellm().token_counter(model=model, messages=messages))
    except Exception:  # tokenizer unavailable offline: a rough, documented fallback
        return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)


def price_tokens(model: str, prompt_tokens: int, completion_tokens: int) -> tuple[float, bool]:
    """(USD, known) for the given token counts at litellm's list price for `model`."""
    try:
        prompt_usd, completion_usd = load_litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # litellm raises for models it has no price for
        return 0.0, False
    return float(prompt_usd + completion_usd), True


def estimate_cost(model: str, messages: list[dict[str, str]], max_completion_tokens: int) -> CostEstimate:
    """Estimate of one request's tokens and USD (the completion counted at its cap)."""
    prompt_tokens = count_prompt_tokens(model, messages)
    usd, known = price_tokens(model, prompt_tokens, max_completion_tokens)
    return CostEstimate(prompt_tokens, max_completion_tokens, usd, known)
