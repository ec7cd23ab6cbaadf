"""Every time the API returns: UTC, ISO-8601, ending in `Z`, whatever the database handed back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import PlainSerializer, WithJsonSchema


def utc_z(value: datetime) -> str:
    """`2026-11-28T17:30:00.123456Z`; a naive value (SQLite drops the zone) is UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# A datetime field of a response model: the same text on POST and GET, SQLite and Postgres.
UtcTime = Annotated[datetime, PlainSerializer(utc_z, return_type=str, when_used="json"),
                    WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization")]
