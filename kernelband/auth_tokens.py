"""The one API token format (kb_<8 hex>_<secret>), hashing and comparison; no database access."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

TOKEN_PREFIX = "kb_"
# kb_<8 hex prefix>_<secret>: the prefix names the token in lists and revocation without
# revealing it; only the sha256 of the whole token is stored.
_TOKEN_RE = re.compile(r"^kb_([0-9a-f]{8})_[A-Za-z0-9_-]{20,}$")


@dataclass(frozen=True)
class NewToken:
    """A freshly minted token; `secret` is shown to the user once and never stored."""

    prefix: str
    secret: str
    sha256: str


def hash_token(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def mint_token() -> NewToken:
    """A new random token with its public prefix and stored hash."""
    prefix = secrets.token_hex(4)
    token = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    return NewToken(prefix=prefix, secret=token, sha256=hash_token(token))


def token_prefix(token: str) -> str | None:
    """The public prefix of a well-formed token, else None."""
    match = _TOKEN_RE.match(token)
    return match.group(1) if match else None


def hashes_match(token: str, stored_sha256: str) -> bool:
    """Constant-time comparison of a presented token with a stored hash."""
    return hmac.compare_digest(hash_token(token), stored_sha256)


# What a token may do, weakest first; each scope includes the ones before it.
# read: every GET (a dashboard on a wall screen); submit: jobs, suites, cancel, skill settings;
# admin: the team's tokens and webhooks as well.
SCOPES = ("read", "submit", "admin")


def scope_allows(held: str, needed: str) -> bool:
    """Whether a token of scope `held` may do what needs `needed` (unknown scopes allow nothing)."""
    if held not in SCOPES or needed not in SCOPES:
        return False
    return SCOPES.index(held) >= SCOPES.index(needed)
