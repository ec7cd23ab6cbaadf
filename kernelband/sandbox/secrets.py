"""Every secret value this process holds, scrubbed from text that goes back to a team."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from kernelband.sandbox.settings import node_settings

# Variables whose name matches this never reach untrusted code (credentials, service URLs).
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|DATABASE_URL|DSN|BROKER"
    r"|_URL$|^AWS_|^GCP_|^GOOGLE_|^AZURE_|^OPENAI|^ANTHROPIC|^HF_|^PG|^REDIS|^CELERY",
    re.IGNORECASE,
)

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4  # shorter values ("1", "on") would redact ordinary text and hide nothing


def _url_password(value: str) -> str:
    try:
        password = urlsplit(value).password
    except ValueError:
        return ""
    return unquote(password) if password else ""


def secret_values() -> set[str]:
    """Values of secret-named variables (SECRET_NAME) and the settings' secrets,
    with the passwords inside any URL among them."""
    values = {v for k, v in os.environ.items() if SECRET_NAME.search(k)}
    try:
        s = node_settings()
        values |= {s.llm_api_key.get_secret_value(), s.bootstrap_token.get_secret_value(),
                   s.database_url, s.broker_url, s.result_backend_url}
    except Exception:  # noqa: BLE001 - settings that do not validate hold no value to add
        pass
    values |= {_url_password(v) for v in list(values) if "://" in v}
    return {v for v in values if len(v) >= MIN_SECRET_CHARS}


def scrub_secrets(text: str) -> str:
    """`text` with every secret value this process holds replaced by [redacted]."""
    if not text:
        return text
    for value in sorted(secret_values(), key=len, reverse=True):  # a URL before its password
        text = text.replace(value, REDACTED)
    return text
