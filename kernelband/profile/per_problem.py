"""What a judge decides once per problem and keeps for later candidates."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class PerProblem:
    """What a judge decides once per problem and keeps for its later candidates (batch sizes,
    autotune picks), by key; the least recently used go first past `size`."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.known: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.known.get(key)
            if found is not None:
                self.known.move_to_end(key)
            return dict(found) if found is not None else None

    def keep(self, key: str, value: dict[str, Any]) -> None:
        with self.lock:
            self.known[key] = dict(value)
            self.known.move_to_end(key)
            while len(self.known) > self.size:
                self.known.popitem(last=False)
