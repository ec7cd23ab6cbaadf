"""Serve a job's recorded replies again: the scripted server's `--replay JOB_EXPORT` mode.

JOB_EXPORT is the JSON of GET /v1/jobs/{id}/transcripts (`{"job_id": .., "transcripts": [..]}`).
Each request is answered with the next recorded reply for its (problem, strategy, repair turn),
in recorded order; the last one repeats when a run asks for more than was recorded.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from kernelband.generate.fake_server import _MARKER, repair_turn

Key = tuple[str, str, int]


def _key(messages: list[dict[str, Any]], turn: int) -> Key | None:
    text = "\n".join(str(m.get("content", "")) for m in messages)
    match = _MARKER.search(text)
    return None if match is None else (match.group(1), match.group(2), turn)


class ReplayScript:
    """Recorded replies per (problem, strategy, turn), handed out in order."""

    def __init__(self, export: Path) -> None:
        try:
            data = json.loads(export.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{export} is not a transcript export ({exc}); download one with "
                             "GET /v1/jobs/{id}/transcripts?download=true") from exc
        rows = data.get("transcripts") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ValueError(f"{export} has no 'transcripts' list; download a job's export with "
                             "GET /v1/jobs/{id}/transcripts?download=true")
        self._queues: dict[Key, deque[str]] = defaultdict(deque)
        self._last: dict[Key, str] = {}
        for row in rows:
            key = _key(row.get("messages") or [], int(row.get("turn") or 0))
            if key is not None and row.get("reply"):
                self._queues[key].append(str(row["reply"]))
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.prompts: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def recorded(self) -> int:
        """How many replies the export holds."""
        return sum(len(q) for q in self._queues.values()) + len(self._last)

    def next_step(self, problem: str, strategy: str, prompt: str = "") -> dict[str, Any]:
        """The next recorded reply for this request, or a 404 step naming what is missing."""
        key = (problem, strategy, repair_turn(prompt))
        with self._lock:
            queue = self._queues.get(key)
            if queue:
                self._last[key] = queue.popleft()
            reply = self._last.get(key)
        if reply is None:
            return {"status": 404, "text": f"the export recorded no reply for problem={problem} "
                    f"strategy={strategy} repair turn={key[2]}"}
        return {"text": reply}
