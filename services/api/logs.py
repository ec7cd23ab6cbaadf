"""Keep tokens out of logs: a filter that redacts bearer tokens wherever they appear."""

from __future__ import annotations

import logging
import re

_PATTERNS = (
    re.compile(r"kb_[0-9a-f]{8}_[A-Za-z0-9_-]+"),
    re.compile(r"(?i)(bearer\s+)[^\s'\",]+"),
)
LOGGERS = ("uvicorn", "uvicorn.access", "uvicorn.error", "services.api", "")


def redact(text: str) -> str:
    """The text with every token replaced by a placeholder that keeps its public prefix."""
    text = _PATTERNS[0].sub(lambda m: m.group(0)[:11] + "_[REDACTED]", text)
    return _PATTERNS[1].sub(r"\1[REDACTED]", text)


class RedactTokensFilter(logging.Filter):
    """Rewrites a record's message and arguments before any handler formats them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install_log_redaction() -> None:
    """Attach the filter to the API's and uvicorn's loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokensFilter) for f in logger.filters):
            logger.addFilter(RedactTokensFilter())
