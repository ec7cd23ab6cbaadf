"""The node's settings, as the parent side of the sandbox reads them.

Sandbox children import this package too but never read settings, so `kernelband.config` (it
loads pydantic: about 0.3 s of every cold child's start) is imported on the first read, here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelband.config import Settings


def node_settings() -> Settings:
    """`kernelband.config.get_settings()`, imported on first use."""
    from kernelband.config import get_settings  # pydantic stays out of sandbox children

    return get_settings()
