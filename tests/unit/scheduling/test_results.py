"""Task results: each kind's value survives the trip through JSON, and a malformed answer is
refused with a reason naming what was wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelband.generate.messages import GenerationResult
from kernelband.profile.measurement import Measurement
from kernelband.profile.paired import PairedSpeedup
from kernelband.scheduling.dispatch import task_error_result
from kernelband.scheduling.results import (
    CompileResult,
    GenerateResult,
    LeaseBeat,
    ProfileResult,
    ResultValue,
    VerifyResult,
    lost_result,
    read_result,
)

MEASUREMENT = Measurement(label="measured", method="cuda-events", device="NVIDIA H100",
                          target="h100", time_ms=1.25, case_times_ms={"c1": 1.25}, cv=0.01,
                          speedup=PairedSpeedup(1.4, 1.3, 1.5, 20, "interleaved", "original"))
VALUES: list[ResultValue] = [
    GenerateResult.of(GenerationResult(
        ok=True, editable="x = 1", prompt_tokens=120, completion_tokens=40, cost_usd=0.002,
        model="m", strategy="tiling", notes=("kept",), messages=({"role": "user",
                                                                  "content": "hi"},),
        reply="```x = 1```")),
    CompileResult(ok=False, reason="wrong_result", message="case c1", verdict={"correct": False},
                  timings={"check": 0.5}),
    ProfileResult(ok=True, verdict={"correct": True}, measurement=MEASUREMENT,
                  features={"phi": [1.0], "h": [1.0, 2.0, 3.0]}, timings={"measure": 2.0}),
    VerifyResult(ok=True, verdict={"correct": True, "held_out_checked": 2},
                 measurement=MEASUREMENT),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: v.kind)
def test_each_kind_round_trips_through_json(value: ResultValue) -> None:
    wire = json.loads(json.dumps(value.to_dict()))
    assert read_result(value.kind, wire) == value
    assert read_result(value.kind, wire).to_dict() == wire


def test_a_measurement_is_written_as_its_own_to_dict() -> None:
    assert ProfileResult(ok=True, measurement=MEASUREMENT).to_dict()["measurement"] == \
        MEASUREMENT.to_dict()


def test_a_generate_result_carries_every_field_of_the_generators_answer() -> None:
    generation = GenerationResult(ok=True, editable="y", latency_s=1.5, attempts=2)
    value = GenerateResult.of(generation)
    assert GenerationResult.from_dict({k: v for k, v in value.to_dict().items()
                                       if k != "lost"}) == generation


def test_keys_no_step_reads_are_kept_as_sent() -> None:
    failed = task_error_result("compile", OSError("disk full"))
    value = read_result("compile", {**failed, "_worker": {"name": "w1"}})
    assert value.broken and value.reason == "task_error:OSError"
    assert value.to_dict()["traceback"] == failed["traceback"]
    assert value.to_dict()["_worker"] == {"name": "w1"}


@pytest.mark.parametrize(("kind", "data", "reason", "named"), [
    ("profile", {"ok": True, "measurement": {"label": "estimated"}},
     "malformed_result:measurement", "method, device, target, time_ms"),
    ("generate", {"ok": True, "editable": "x", "prompt_tokens": "many"},
     "malformed_result:prompt_tokens", "not an integer"),
    ("compile", {"reason": "no ok"}, "malformed_result:ok", "missing"),
    ("verify", ["not", "an", "object"], "malformed_result:body", "list"),
])
def test_a_malformed_result_is_refused_with_its_reason(kind: str, data: Any, reason: str,
                                                       named: str) -> None:
    value = read_result(kind, data)
    assert type(value).kind == kind
    assert (value.ok, value.lost, value.broken, value.reason) == (False, True, True, reason)
    assert named in value.message and value.extra["received"] == data


def test_a_lost_result_fails_its_attempt() -> None:
    value = lost_result("generate", "lease_expired")
    assert isinstance(value, GenerateResult) and value.broken and not value.ok
    assert read_result("generate", value.to_dict()) == value


def test_a_heartbeat_is_a_lease_beat_not_a_result() -> None:
    assert LeaseBeat.read({"heartbeat": True, "task_id": "kb-1-1"}) == LeaseBeat("kb-1-1")
    assert LeaseBeat.read({"ok": True}) is None
