"""Persistence: SQLAlchemy models, session scope, migrations check and repository functions."""

from kernelband.db.models import Base
from kernelband.db.session import (
    ConflictError,
    DatabaseError,
    DatabaseUnavailableError,
    SchemaVersionError,
    check_schema_version,
    make_engine,
    make_session_factory,
    open_database,
    session_scope,
    upgrade_database,
)

__all__ = [
    "Base",
    "ConflictError",
    "DatabaseError",
    "DatabaseUnavailableError",
    "SchemaVersionError",
    "check_schema_version",
    "make_engine",
    "make_session_factory",
    "open_database",
    "session_scope",
    "upgrade_database",
]
