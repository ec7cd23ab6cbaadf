"""Problem tests run Triton kernels on the CPU interpreter (set before triton decorates)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A private folder for the module files the loaders write."""
    return tmp_path
