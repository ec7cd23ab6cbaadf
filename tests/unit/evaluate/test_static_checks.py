"""The static source checks: what a candidate may import, given the original it rewrites."""

from __future__ import annotations

from kernelband.evaluate.static_checks import check_source

KERNEL = "import torch\nimport triton\nimport triton.language as tl\n"


def test_a_reporting_module_the_original_imports_may_stay_in_its_rewrite() -> None:
    original = "import warnings\n" + KERNEL
    rewrite = original + "warnings.warn('slow path')\n"
    assert check_source(rewrite, original) is None
    refused = check_source(rewrite)  # without the original: refused, and the message says why
    assert refused is not None and refused.reason == "forbidden_import"
    assert "logging or warnings where the original imports them" in refused.message


def test_the_original_importing_a_guarded_module_opens_nothing() -> None:
    for module in ("time", "threading", "os", "sys", "ctypes"):
        original = f"import {module}\n" + KERNEL
        found = check_source(original, original)
        assert found is not None and found.reason == "forbidden_import", module


def test_from_imports_of_the_original_count_and_a_broken_original_adds_nothing() -> None:
    assert check_source("from logging import getLogger\n", "from logging import getLogger\n") is None
    assert check_source("import logging\n", "def broken(:\n") is not None
