"""Loop tests share one loaded vector_add problem (loading runs a sandbox)."""

from __future__ import annotations

import pytest
from loop_kit import vector_add

from kernelband.problem.model import KernelProblem


@pytest.fixture(scope="session")
def problem() -> KernelProblem:
    return vector_add()
