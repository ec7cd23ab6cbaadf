"""How JSON columns are encoded and decoded: orjson, with the standard library as fallback.

Every scheduler pass encodes and decodes JSON columns by the thousand (attempt payloads and
results, events, policy state, frontier entries, measurements); with the standard library's
encoder that was about a twentieth of a pass at 100 jobs. `make_engine` hands these two
functions to SQLAlchemy, which uses them for every JSON column (and, on Postgres, registers
`loads` with psycopg2).

Differences from `json.dumps` a caller may notice: NaN and infinities are written as null
(Postgres refuses them in a `json` column anyway), non-ASCII text is written as UTF-8 rather
than escaped, numpy scalars and arrays are written as numbers and lists, and dict keys that
are not strings are written as strings, as the standard library does. A value orjson cannot
encode (an integer beyond 64 bits, an unknown type) goes to `json.dumps`, which encodes it or
raises its usual TypeError.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(value: Any) -> str:
    """`value` as JSON text."""
    try:
        return orjson.dumps(value, option=_OPTIONS).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value)


def loads(text: str | bytes) -> Any:
    """The value of JSON text (falls back to `json.loads` for what orjson refuses)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


__all__ = ["dumps", "loads"]
