"""A results message's body decodes as kombu decodes it; what orjson may not read as kombu
does goes to kombu."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kombu.serialization import loads

from services.scheduler.dispatcher import decoded_body

KOMBU = object()


@dataclass
class FakeMessage:
    body: bytes
    content_type: str = "application/json"

    def decode(self) -> Any:
        return KOMBU


def test_plain_json_decodes_as_kombu_decodes_it() -> None:
    body = (b'{"type": "result", "attempt_id": 7, "result": {"ok": true, "time_ms": 0.1,'
            b' "phi": [1.5e-07, 2, null], "reason": "\\u00e9"}, "wall_s": 1.25}')
    assert decoded_body(FakeMessage(body)) == loads(body, "application/json", "utf-8")


def test_what_orjson_may_read_otherwise_goes_to_kombu() -> None:
    encoded_type = b'{"sent_at": {"__type__": "datetime", "__value__": "2026-12-01T00:00:00"}}'
    assert decoded_body(FakeMessage(encoded_type)) is KOMBU
    assert decoded_body(FakeMessage(b'{"time_ms": NaN}')) is KOMBU
    assert math.isnan(loads(b'{"time_ms": NaN}', "application/json", "utf-8")["time_ms"])
    assert decoded_body(FakeMessage(b"{}", content_type="application/x-yaml")) is KOMBU
