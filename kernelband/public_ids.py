"""Opaque public ids: what a team sees in place of the database's integer primary keys.

Rows are numbered by global sequences, so a job id a team sees would tell it how many jobs all
other teams submitted in between. Every id that leaves the service (API, dashboard, CLI,
events, webhooks, exports) is therefore `<kind>_<13 characters>`: the integer, padded with 24
zero bits to a 64-bit block, through a keyed permutation (a 6-round Feistel network whose
round function is keyed BLAKE2b, one key per kind), written in Crockford base32. Without the
key, ids of consecutive rows look unrelated; with the kind in the key, a job id never decodes
as a candidate id; a forged or mangled id fails the zero-bit check (or names someone else's
row, which the API answers exactly like a missing one).

The key is `KERNELBAND_ID_KEY` when set, else a random key stored once in the database
(`public_id_keys`), so every API process and the webhook deliverer agree, across restarts.
Changing the key changes every id a team has seen: set it once.
"""

from __future__ import annotations

import hashlib
import secrets
from contextvars import ContextVar, Token
from functools import lru_cache
from typing import Any, Literal, get_args

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.config import get_settings
from kernelband.db.id_key_models import PublicIdKey

Kind = Literal["job", "cand", "prob", "hook", "dlv", "skill", "turn", "att"]
KINDS: tuple[str, ...] = get_args(Kind)

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32: no i, l, o, u
_DIGIT = {c: i for i, c in enumerate(_ALPHABET)}
_CHARS = 13  # 64 bits in base32
_ROUNDS = 6  # a Feistel network with a keyed PRF is a strong permutation from 4
_VALUE_BITS = 40  # ids up to about 10^12; the other 24 bits must decode as zero
_MASK32 = 0xFFFFFFFF
MAX_VALUE = (1 << _VALUE_BITS) - 1


class PublicIds:
    """The keyed permutation between (kind, integer id) and public id text."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a public-id key needs at least 16 bytes")
        root = hashlib.blake2b(key, digest_size=32, person=b"kb-public-ids").digest()
        # One prepared keyed hash per (kind, round): a round is then a copy and an update.
        self._rounds = {kind: [hashlib.blake2b(key=root, digest_size=4, person=kind.encode(),
                                               salt=bytes([r]) * 16)
                               for r in range(_ROUNDS)] for kind in KINDS}
        self.encode = lru_cache(maxsize=1 << 16)(self._encode)

    def _encode(self, kind: str, value: int) -> str:
        """`job_3k9f...`: the public form of row `value` of `kind`."""
        if not 0 <= value <= MAX_VALUE:
            raise ValueError(f"{kind} id {value} is out of the public-id range")
        left, right = value >> 32, value & _MASK32  # left: 24 zero bits, value's top 8
        for hasher in self._rounds[kind]:
            left, right = right, left ^ _round(hasher, right)
        block = (left << 32) | right
        return f"{kind}_{_base32(block)}"

    def decode(self, kind: str, text: str) -> int | None:
        """The row id behind `text` when it is a well-formed id of `kind`, else None."""
        prefix, _, body = text.partition("_")
        if prefix != kind or kind not in self._rounds:
            return None
        block = _from_base32(body)
        if block is None:
            return None
        left, right = block >> 32, block & _MASK32
        for hasher in reversed(self._rounds[kind]):
            left, right = right ^ _round(hasher, left), left
        value = (left << 32) | right
        return value if value <= MAX_VALUE and value > 0 else None


def _round(hasher: hashlib.blake2b, half: int) -> int:
    h = hasher.copy()
    h.update(half.to_bytes(4, "big"))
    return int.from_bytes(h.digest(), "big")


def _base32(block: int) -> str:
    out = []
    for _ in range(_CHARS):
        out.append(_ALPHABET[block & 31])
        block >>= 5
    return "".join(reversed(out))


def _from_base32(body: str) -> int | None:
    if len(body) != _CHARS:
        return None
    block = 0
    for char in body:
        digit = _DIGIT.get(char)
        if digit is None:
            return None
        block = block << 5 | digit
    return block if block >> 64 == 0 else None


def stored_key(session: Session) -> bytes:
    """The database's key, created on first use; concurrent first uses agree on one row."""
    row = session.scalar(select(PublicIdKey).where(PublicIdKey.id == 1))
    if row is None:
        session.add(PublicIdKey(id=1, key=secrets.token_hex(32)))
        try:
            session.commit()
        except Exception:  # another process inserted it first: read theirs
            session.rollback()
        row = session.scalar(select(PublicIdKey).where(PublicIdKey.id == 1))
        assert row is not None
    return bytes.fromhex(row.key)


def load(configured: str, session: Session | None) -> PublicIds:
    """The codec for a process: `KERNELBAND_ID_KEY` when set, else the database's key."""
    if configured:
        return PublicIds(configured.encode())
    if session is None:
        raise RuntimeError("public ids need KERNELBAND_ID_KEY or a database to keep the key")
    return PublicIds(stored_key(session))


_BY_KEY: dict[bytes, PublicIds] = {}


def for_session(session: Session, configured: str | None = None) -> PublicIds:
    """The codec of the database `session` reads, for code that serves no request (the
    webhook deliverer, commands): one small read of the key, the codec itself kept per key.
    `configured` defaults to the settings' `KERNELBAND_ID_KEY`."""
    if configured is None:
        configured = get_settings().id_key.get_secret_value()
    key = configured.encode() if configured else stored_key(session)
    codec = _BY_KEY.get(key)
    if codec is None:
        codec = _BY_KEY[key] = PublicIds(key)
    return codec


# The codec `public` and `internal` use: the API sets it per request (an app serves one
# database); code that serves no request passes `for_session`'s codec explicitly.
_ACTIVE: ContextVar[PublicIds | None] = ContextVar("kernelband_public_ids", default=None)


def activate(codec: PublicIds) -> Token[PublicIds | None]:
    """Use `codec` in this context (a request and the threads it starts) until `deactivate`."""
    return _ACTIVE.set(codec)


def deactivate(token: Token[PublicIds | None]) -> None:
    """Back to the codec before `activate`."""
    _ACTIVE.reset(token)


def current() -> PublicIds:
    """The codec of this request."""
    codec = _ACTIVE.get()
    if codec is None:
        raise RuntimeError("no public-id codec is active: outside a request, use "
                           "for_session(session) and its encode/decode")
    return codec


def public(kind: Kind, value: int) -> str:
    """`value`'s public id with the current codec."""
    return current().encode(kind, value)


def public_or_none(kind: Kind, value: int | None) -> str | None:
    """Like `public`, keeping None (an optional reference)."""
    return None if value is None else current().encode(kind, value)


def internal(kind: Kind, text: str) -> int | None:
    """The row id behind a public id of `kind` (None: malformed, forged or of another kind)."""
    return current().decode(kind, text)


# Keys of the scheduler's event payloads that hold candidate or attempt ids.
_PAYLOAD_IDS: dict[str, Kind] = {
    "candidate": "cand", "parent": "cand", "parent_id": "cand", "duplicate_of": "cand",
    "best_candidate": "cand", "failed_candidate": "cand", "attempt": "att",
}


def public_payload(payload: dict[str, Any], codec: PublicIds | None = None) -> dict[str, Any]:
    """An event payload as a team sees it: its candidate and attempt ids made public."""
    codec = codec or current()
    out = dict(payload)
    for key, kind in _PAYLOAD_IDS.items():
        value = out.get(key)
        if isinstance(value, str) and value.isdigit():  # a decision's parent_id is text
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out[key] = codec.encode(kind, value)
    return out
