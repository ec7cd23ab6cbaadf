"""JSON columns go through orjson; values orjson refuses fall back to the standard library."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import json_codec
from kernelband.db.models import Event
from kernelband.db.session import session_scope
from tests.utils.db_rows import new_job


def test_round_trip_of_the_values_the_scheduler_stores() -> None:
    value = {"labels": "0120", "arm_mu": [[0.5, 1e-05, 123456.789]], "ok": True, "none": None,
             "text": "naïve — ok", "nested": {"a": [1, 2, {"b": "c"}]}}
    assert json_codec.loads(json_codec.dumps(value)) == value
    assert json.loads(json_codec.dumps(value)) == value  # plain JSON to any reader


def test_what_differs_from_the_standard_library_is_documented() -> None:
    assert json_codec.loads(json_codec.dumps({1: "int key"})) == {"1": "int key"}
    assert json_codec.loads(json_codec.dumps([math.nan, math.inf])) == [None, None]
    assert json_codec.loads(json_codec.dumps({"x": np.float64(0.25), "n": np.int64(3),
                                              "a": np.arange(3)})) == {"x": 0.25, "n": 3,
                                                                       "a": [0, 1, 2]}


def test_what_orjson_refuses_goes_to_the_standard_library() -> None:
    huge = 2**70
    assert json_codec.loads(json_codec.dumps({"huge": huge})) == {"huge": huge}
    with pytest.raises(TypeError):
        json_codec.dumps({"unknown": object()})


def test_json_columns_use_the_codec(db_factory: sessionmaker[Session]) -> None:
    with session_scope(db_factory) as session:
        job = new_job(session, "codec-team")
        session.add(Event(job_id=job.id, seq=1, kind="probe",
                          payload={"speedup": np.float64(1.5), "nan": math.nan}))
    with session_scope(db_factory) as session:
        payload = session.scalars(select(Event.payload)).one()
    assert payload == {"speedup": 1.5, "nan": None}
