"""Remove secrets from text before it is stored or shown (prompts, replies, messages)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),  # OpenAI-style keys
    re.compile(r"\bkb_[A-Za-z0-9_\-]{16,}"),  # KernelBand API tokens
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)\b(api[_-]?key|secret|password|token)(\s*[:=]\s*)['\"]?[^\s'\"]{6,}"),
)
REDACTED = "[redacted]"


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with known secret values and secret-looking strings replaced by [redacted]."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        if pattern.groups >= 2:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def scrub_messages(messages: Iterable[dict[str, str]],
                   secrets: Iterable[str] = ()) -> list[dict[str, str]]:
    """Chat messages with every content scrubbed."""
    keep = list(secrets)
    return [{"role": str(m.get("role", "")), "content": scrub(str(m.get("content", "")), keep)}
            for m in messages]
