"""Every speedup the API returns is paired with its interval, a labelled estimate, or none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Candidate, Measurement, Track
from kernelband.db.session import session_scope
from tests.utils.public_ids import public_id, row_id

Body = Callable[..., dict[str, Any]]
PAIRED = {"speedup_rounds": 24, "speedup_method": "ABBA rounds, bootstrap 95%",
          "speedup_baseline": "original"}


def _measure(candidate: Candidate, target: str, time_ms: float, label: str = "measured",
             **paired: Any) -> Measurement:
    return Measurement(candidate_id=candidate.id, label=label, method="paired A/B",
                       device="NVIDIA H200", target=target, time_ms=time_ms, **paired)


def _seed(factory: sessionmaker[Session], job: str) -> dict[str, str]:
    """h200: the best's interval contains 1.0; a sibling measured before pairing existed.
    cpu: an estimate (cost model ratio, no interval). Returns the candidates' public ids."""
    job_id = row_id(factory, job)
    with session_scope(factory) as s:
        gpu = Track(job_id=job_id, target="h200", status="completed", original_time_ms=2.0)
        cpu = Track(job_id=job_id, target="cpu", status="completed", original_time_ms=3.0)
        s.add_all([gpu, cpu])
        s.flush()
        rows = {name: Candidate(track_id=track.id, editable="x", status="measured",
                                parent_id=None, lineage_depth=depth)
                for name, track, depth in (("original", gpu, 0), ("unsure", gpu, 1),
                                           ("legacy", gpu, 1), ("cpu_original", cpu, 0),
                                           ("estimate", cpu, 1))}
        s.add_all(rows.values())
        s.flush()
        s.add_all([
            _measure(rows["original"], "h200", 2.0),
            _measure(rows["unsure"], "h200", 1.96, speedup=1.02, speedup_low=0.97,
                     speedup_high=1.06, **PAIRED),
            _measure(rows["legacy"], "h200", 0.4),  # 5x unpaired: never shown as a speedup
            _measure(rows["cpu_original"], "cpu", 3.0, label="estimated"),
            _measure(rows["estimate"], "cpu", 2.0, label="estimated"),
        ])
        gpu.original_candidate_id, gpu.best_candidate_id = rows["original"].id, rows["unsure"].id
        gpu.best_time_ms, gpu.best_label, gpu.best_speedup = 1.96, "measured", 1.02
        gpu.best_speedup_low, gpu.best_speedup_high = 0.97, 1.06
        gpu.best_speedup_method, gpu.best_speedup_final = PAIRED["speedup_method"], True
        cpu.original_candidate_id, cpu.best_candidate_id = rows["cpu_original"].id, rows["estimate"].id
        cpu.best_time_ms, cpu.best_label, cpu.best_speedup = 2.0, "estimated", 1.5
        return {name: public_id(s, "cand", row.id) for name, row in rows.items()}


def test_best_per_target_carries_interval_or_estimate_label(
    client: TestClient, auth: dict[str, str], job_body: Body,
    factory: sessionmaker[Session],
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(targets=["h200", "cpu"]), headers=auth).json()["id"]
    _seed(factory, job_id)
    tracks = {t["target"]: t["best"] for t in client.get(f"/v1/jobs/{job_id}", headers=auth).json()["tracks"]}
    gpu, cpu = tracks["h200"], tracks["cpu"]
    assert (gpu["speedup"], gpu["speedup_low"], gpu["speedup_high"]) == (1.02, 0.97, 1.06)
    assert gpu["significant"] is False and gpu["speedup_final"] is True
    assert gpu["speedup_text"] == "1.02x [0.97, 1.06], no significant speedup"
    assert gpu["speedup_method"] == "ABBA rounds, bootstrap 95%"
    assert cpu["speedup"] == 1.5 and cpu["label"] == "estimated"
    assert (cpu["speedup_low"], cpu["speedup_high"], cpu["significant"]) == (None, None, False)
    assert cpu["speedup_text"] == "1.50x estimated"


def test_candidate_measurements_never_divide_two_unpaired_times(
    client: TestClient, auth: dict[str, str], job_body: Body,
    factory: sessionmaker[Session],
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(targets=["h200", "cpu"]), headers=auth).json()["id"]
    ids = _seed(factory, job_id)
    cands = client.get(f"/v1/jobs/{job_id}/candidates", headers=auth).json()["candidates"]
    shown = {c["id"]: c["measurements"][0] for c in cands}
    legacy = shown[ids["legacy"]]
    assert legacy["time_ms"] == 0.4 and legacy["speedup"] is None
    assert legacy["speedup_text"] == "not measured" and legacy["significant"] is False
    assert shown[ids["unsure"]]["speedup_text"] == "1.02x [0.97, 1.06], no significant speedup"
    assert shown[ids["original"]]["speedup_text"] == "1.00x original"
    assert shown[ids["estimate"]]["speedup"] == 1.5
    assert shown[ids["estimate"]]["speedup_text"] == "1.50x estimated"
