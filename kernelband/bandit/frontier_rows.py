"""Row storage shared by the frontier arrays of one growing frontier.

A frontier only grows at its end, and each selection after an update asks for the arrays of
a frontier one entry longer than the last. Copying every earlier row into new arrays (and
the kernel-id map into a new dict) for each new entry made that ask cost in proportion to
the frontier's length. Here the rows live in buffers with room to spare: arrays of the first
n rows are views of the buffers, so a longer frontier writes its new rows only, and the views
handed out before still read the rows they were built from (a row, once written, is never
written again). Only one line of growth writes in place: arrays whose frontier is not the
longest the buffers hold, extended by other entries than the buffers hold after it, get
buffers of their own (a copy, as before).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from kernelband.bandit.types import FrontierEntry

_NO_NAN = sys.maxsize


class FrontierRows:
    """Buffers of per-entry values for a frontier's first `filled` entries (`entries`)."""

    def __init__(self, capacity: int, phi_width: int) -> None:
        capacity = max(capacity, 16)
        self.entries: list[FrontierEntry] = []
        self.time_ms = np.empty(capacity, dtype=float)
        self.h = np.empty((capacity, 3), dtype=float)
        self.has_h = np.empty(capacity, dtype=bool)
        self.phi_width = phi_width
        self.phi = np.empty((capacity, phi_width), dtype=float) if phi_width else None
        self.phi_rows = 0  # leading entries whose phi has `phi_width` values
        self.first_nan = _NO_NAN  # position of the first NaN time
        # kernel id -> its first position; holds ids of every entry written, so a reader of
        # the first n rows takes a position below n only (`position`)
        self.ids: dict[str, int] = {}

    @property
    def filled(self) -> int:
        return len(self.entries)

    @classmethod
    def of(cls, entries: Sequence[FrontierEntry]) -> FrontierRows:
        """Buffers holding `entries`."""
        width = len(entries[0].phi) if entries else 0
        rows = cls(2 * len(entries), width)
        rows.append(entries)
        return rows

    def copy_prefix(self, size: int, extra: int) -> FrontierRows:
        """New buffers holding the first `size` rows, with room for `extra` more."""
        rows = FrontierRows(2 * (size + extra), self.phi_width)
        rows.entries = self.entries[:size]
        rows.time_ms[:size] = self.time_ms[:size]
        rows.h[:size] = self.h[:size]
        rows.has_h[:size] = self.has_h[:size]
        rows.phi_rows = min(self.phi_rows, size)
        if rows.phi is not None and self.phi is not None:
            rows.phi[:rows.phi_rows] = self.phi[:rows.phi_rows]
        rows.first_nan = self.first_nan if self.first_nan < size else _NO_NAN
        rows.ids = {kernel_id: at for kernel_id, at in self.ids.items() if at < size}
        return rows

    def holds(self, size: int, new: Sequence[FrontierEntry]) -> bool:
        """Whether the rows after the first `size` begin with `new` (written before)."""
        end = size + len(new)
        return end <= self.filled and self.entries[size:end] == list(new)

    def append(self, new: Sequence[FrontierEntry]) -> None:
        """Write rows for `new` after the last row written (the buffers grow as needed)."""
        start, end = self.filled, self.filled + len(new)
        if end > len(self.time_ms):
            self._grow(2 * end)
        self.time_ms[start:end] = np.fromiter((e.time_ms for e in new), dtype=float,
                                              count=len(new))
        self.has_h[start:end] = np.fromiter((e.h is not None for e in new), dtype=bool,
                                            count=len(new))
        if new:
            self.h[start:end] = np.array([e.h if e.h is not None else (np.nan,) * 3
                                          for e in new], dtype=float).reshape(-1, 3)
        if self.first_nan == _NO_NAN:
            nan = np.flatnonzero(np.isnan(self.time_ms[start:end]))
            if len(nan):
                self.first_nan = start + int(nan[0])
        if self.phi is not None and self.phi_rows == start:
            width = self.phi_width
            good = next((i for i, e in enumerate(new) if len(e.phi) != width), len(new))
            if good:
                self.phi[start:start + good] = np.array(
                    [e.phi for e in new[:good]], dtype=float).reshape(-1, width)
            self.phi_rows = start + good
        for offset, entry in enumerate(new):
            self.ids.setdefault(entry.kernel_id, start + offset)
        self.entries.extend(new)

    def _grow(self, capacity: int) -> None:
        filled = self.filled
        for name in ("time_ms", "h", "has_h", "phi"):
            old = getattr(self, name)
            if old is not None:
                grown = np.empty((capacity, *old.shape[1:]), dtype=old.dtype)
                grown[:filled] = old[:filled]
                setattr(self, name, grown)

    def position(self, kernel_id: str, size: int) -> int | None:
        """The first position of `kernel_id` among the first `size` rows, or None."""
        at = self.ids.get(kernel_id)
        return at if at is not None and at < size else None

    def phi_of(self, size: int) -> np.ndarray | None:
        """phi of the first `size` rows while all have one of the same length; else None."""
        if self.phi is None or self.phi_width == 0 or self.phi_rows < size:
            return None
        return self.phi[:size]

    def nan_free(self, size: int) -> bool:
        """Whether no time among the first `size` rows is NaN."""
        return self.first_nan >= size


__all__ = ["FrontierRows"]
