"""Shared fixtures of the profile tests: interpreter mode, the fixture kernels, a cache dir."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # before any fixture kernel is decorated

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def kernels() -> ModuleType:
    """tests/unit/profile/fixtures/kernels.py, imported once."""
    spec = importlib.util.spec_from_file_location("kernelband_profile_fixture_kernels", FIXTURES / "kernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session", autouse=True)
def profile_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Static profiles of the whole test session go to one private cache."""
    path = tmp_path_factory.mktemp("triton-cache")
    previous = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = previous
