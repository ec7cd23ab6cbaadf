"""The declarative base and its one metadata: every model module builds on this, and it
imports none of them, so the model modules can import each other without a circle."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData
from sqlalchemy.orm import DeclarativeBase

# Stable constraint names keep Alembic autogenerate and `alembic check` free of drift.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Timezone-aware now; SQLite drops the zone, so readers must tolerate naive values."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base holding the single metadata of the service."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, datetime: DateTime(timezone=True)}
