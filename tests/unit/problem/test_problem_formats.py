"""Every problem format has a loader, and importing `kernelband.problem` loads none of them."""

from __future__ import annotations

import subprocess
import sys

from kernelband.problem.formats import LOADERS
from kernelband.problem.model import PROBLEM_FORMATS


def test_every_format_has_a_loader() -> None:
    assert tuple(LOADERS) == PROBLEM_FORMATS


def test_the_package_imports_no_loader_and_no_torch() -> None:
    script = ("import sys, kernelband.problem\n"
              "print(sorted(m for m in ('torch', 'kernelband.problem.formats') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
