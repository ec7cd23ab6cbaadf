"""The import shims a bare GPU machine needs (scripts run from a copy of the checkout)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any


def stub_missing_litellm() -> bool:
    """Install an inert `litellm` module when it is not installed; True if a stub was put in.

    `kernelband.generate.budget` imports litellm at import time although only the LLM generator
    uses it; the rules generator never touches it, so any attribute access on the stub fails loudly.
    """
    try:
        import litellm  # noqa: F401
    except ImportError:
        stub = types.ModuleType("litellm")

        def _missing(name: str) -> Any:
            raise AttributeError(f"litellm is not installed on this machine (asked for {name}); "
                                 "only the rules generator can run here")

        stub.__getattr__ = _missing  # type: ignore[method-assign]
        sys.modules["litellm"] = stub
        return True
    return False


def install_path_file(paths: list[str]) -> Path | None:
    """Write a .pth file so sandbox children (started with a scrubbed environment) find `paths`."""
    import site

    for directory in site.getsitepackages():
        target = Path(directory) / "kernelband_gpu_validate.pth"
        try:
            target.write_text("\n".join(paths) + "\n")
        except OSError:
            continue
        return target
    return None
