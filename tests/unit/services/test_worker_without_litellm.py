"""A GPU-only worker installs without litellm (requirements/node.txt): its modules never need it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# `sys.modules[name] = None` makes any later `import name` raise ImportError, as on such a node.
BLOCK_AND_IMPORT = """
import sys
sys.modules["litellm"] = None
import services.worker.app, services.worker.tasks, kernelband.scheduling.tasks
from kernelband.generate.budget import load_litellm
try:
    load_litellm()
except ImportError as exc:
    print(exc)
"""


def test_worker_modules_import_without_litellm_and_an_llm_call_says_what_to_install() -> None:
    result = subprocess.run([sys.executable, "-c", BLOCK_AND_IMPORT], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "kernelband[llm]" in result.stdout and "rules generator" in result.stdout
