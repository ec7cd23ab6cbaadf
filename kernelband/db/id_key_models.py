"""SQLAlchemy model of the key behind public ids (kernelband/public_ids.py).

One row (id=1), written once by the first process that needs it when `KERNELBAND_ID_KEY` is
not set; `kernelband.db.models` re-exports it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from kernelband.db.base import Base, utcnow


class PublicIdKey(Base):
    """The secret key of the public-id permutation (hex), shared by every API process."""

    __tablename__ = "public_id_keys"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
