"""The one error a problem file's loading and text handling raise, importable by every module
of the package without importing another."""

from __future__ import annotations


class ProblemLoadError(ValueError):
    """A file is not a valid kernel problem; `reason` is what to fix."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason = reason
        self.line = line
        super().__init__(f"{reason} (line {line})" if line else reason)
