"""Where a module's editable region lies, and whether one of its functions is running."""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class RegionScope:
    """The editable region of one imported module: its file and line range (1-based)."""

    filename: str
    first_line: int
    last_line: int

    def on_stack(self) -> bool:
        """True when a function defined inside the region is running (the caller's stack)."""
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if code.co_filename == self.filename and (
                self.first_line <= code.co_firstlineno <= self.last_line
                and code.co_name != "<module>"
            ):
                return True
            frame = frame.f_back  # type: ignore[assignment]
        return False
