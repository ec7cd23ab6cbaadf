"""Cheating and crashing kernels served as LLM children inside a running distributed job:
each is rejected for its reason, workers stay up, the job completes, and no secret (API token,
LLM key) shows up in logs, events, prompts or pages."""

from __future__ import annotations

import difflib
import io
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.config import Settings
from kernelband.db.models import Candidate, Event, Track
from kernelband.db.session import make_engine, make_session_factory, session_scope
from services.api.app import create_app
from services.api.teams import create_token
from tests.integration.conftest import POISON_DATABASE_URL
from tests.utils.fake_llm import running_fake_llm
from tests.utils.processes import (
    claim_redis_db,
    redis_base_url,
    release_redis_db,
    service_env,
    start_scheduler,
    start_worker,
    wait_finished,
)
from tests.utils.public_ids import row_id

REPO = Path(__file__).resolve().parents[2]
ADVERSARIAL = REPO / "tests" / "unit" / "evaluate" / "adversarial"
REPLIES = REPO / "tests" / "utils" / "fake_llm_replies" / "adversarial"
LLM_KEY = "sk-reliability-SECRET-7f3a9c"  # must never appear anywhere the test can read
# candidate file -> reasons a job may give (the static source check can catch some first)
EXPECTED: dict[str, set[str]] = {
    "infinite_loop": {"timeout"},
    "os_exit": {"no_result", "forbidden_import"},
    "torch_decoy": {"decoy_no_triton_launch"},
    "patch_allclose": {"monkey_patching"},
    "cached_output": {"wrong_result"},
    "mutate_inputs": {"input_mutated"},
    "nan_output": {"nan_mismatch"},
    "wrong_shape": {"wrong_shape"},
    "wrong_dtype": {"wrong_dtype"},
    "raises": {"candidate_error"},
    # reads every /proc/<pid>/environ and cwd it can reach and puts them in its error message
    "reads_service_secrets": {"candidate_error"},
}


@pytest.fixture
def script_dir(tmp_path: Path) -> Path:
    """The scripted replies: each adversarial file (the evaluator's suite, not a copy kept
    here) wrapped as a model answer, served in order by REPLIES/vector_add/default.json."""
    root = tmp_path / "replies"
    (root / "vector_add").mkdir(parents=True)
    (root / "vector_add" / "default.json").write_text(
        (REPLIES / "vector_add" / "default.json").read_text())
    for name in EXPECTED:
        code = (ADVERSARIAL / f"{name}.py").read_text()
        (root / "vector_add" / f"{name}.md").write_text(
            f"Here is a faster version.\n\n```python\n{code}```\n")
    return root


@pytest.fixture
def captured_logs() -> Iterator[io.StringIO]:
    """Everything this process logs (the API runs in it) while the test runs."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(old_level)


def _origin(editable: str) -> str:
    """The adversarial file a candidate came from (closest text)."""
    scores = {name: difflib.SequenceMatcher(None, editable, (ADVERSARIAL / f"{name}.py")
                                            .read_text()).ratio() for name in EXPECTED}
    return max(scores, key=lambda name: scores[name])


def test_adversarial_children_are_rejected_with_reasons_and_no_secret_leaks(
        factory: sessionmaker[Session], postgres_url: str, script_dir: Path, log_dir: Path,
        captured_logs: io.StringIO, tally: Counter[str]) -> None:
    db = claim_redis_db()
    broker = f"{redis_base_url()}/{db}"
    engine = make_engine(postgres_url)
    api_factory = make_session_factory(engine)
    with session_scope(api_factory) as session:
        token = create_token(session, "adversarial")
    app = create_app(Settings(broker_url=""), session_factory=api_factory, embedded=True)
    headers = {"Authorization": f"Bearer {token}"}
    started = []
    with running_fake_llm(script_dir) as fake:
        env = service_env(POISON_DATABASE_URL, broker, broker, KERNELBAND_HEARTBEAT_INTERVAL_S="2",
                          KERNELBAND_LLM_API_BASE=fake.api_base, KERNELBAND_LLM_API_KEY=LLM_KEY,
                          KERNELBAND_SANDBOX_TIMEOUT_S="8", KERNELBAND_LLM_MAX_RETRIES="1")
        sched_env = service_env(postgres_url, broker, broker, KERNELBAND_POLL_INTERVAL_S="0.1")
        started += [start_worker("adv-llm", "llm", env, log_dir),
                    start_worker("adv-cpu", "cpu", env, log_dir, concurrency=2),
                    start_scheduler("adv-scheduler", sched_env, log_dir)]
        try:
            with TestClient(app) as client:
                source = (REPO / "examples" / "vector_add.py").read_text()
                created = client.post("/v1/jobs", headers=headers, json={
                    "problem": {"source": source, "name": "vector_add"}, "targets": ["cpu"],
                    # one reply per pull: a repair turn would consume the next adversarial file
                    "generator": {"model": "openai/kb-scripted", "repair_turns": 0},
                    "budget": {"iterations": len(EXPECTED)}, "parallelism": 2})
                assert created.status_code == 201, created.text
                job_id = created.json()["id"]
                job_row = row_id(factory, job_id)
                status = wait_finished(factory, job_row, tuple(started), timeout_s=400)
                pages = [client.get(path, headers=headers).text for path in (
                    f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events",
                    f"/v1/jobs/{job_id}/candidates", "/ui/api/jobs", f"/ui/jobs/{job_id}")]
            assert status == "completed", started[2].log_tail()
            assert all(p.alive() for p in started), "a worker or the scheduler died"
            prompts = [str(r) for r in fake.script.requests]
        finally:
            for process in started:
                process.terminate()
            release_redis_db(db)
            engine.dispose()
    tally["jobs_completed"] += 1
    with session_scope(factory) as session:
        track = session.scalars(select(Track).where(Track.job_id == job_row)).one()
        children = [(c.editable, c.status, c.reason) for c in session.scalars(
            select(Candidate).where(Candidate.track_id == track.id,
                                    Candidate.id != track.original_candidate_id))]
        events = [str(p) for p in session.scalars(select(Event.payload)
                                                  .where(Event.job_id == job_row))]
        stored = [str(c.__dict__) for c in session.scalars(
            select(Candidate).where(Candidate.track_id == track.id))]
    reasons = {_origin(editable): (status, reason) for editable, status, reason in children}
    print(f"adversarial verdicts in the job: {reasons}")
    assert len(reasons) >= 8, f"only {sorted(reasons)} reached the job"
    for name, (status, reason) in reasons.items():
        assert status == "rejected", f"{name} was {status}"
        assert str(reason).split(":", 1)[0] in EXPECTED[name], f"{name}: {reason}"
    tally["adversarial_rejected"] += len(reasons)
    haystacks = {"api logs": captured_logs.getvalue(), "prompts": "\n".join(prompts),
                 "events": "\n".join(events), "pages": "\n".join(pages),
                 "stored candidate rows": "\n".join(stored),
                 **{p.name: p.log_tail(10**7) for p in started}}
    for where, text in haystacks.items():
        # The secret is everything after "kb_<8 hex>_"; it may itself contain "_".
        assert token not in text and token.split("_", 2)[2] not in text, f"API token in {where}"
        assert LLM_KEY not in text, f"LLM API key in {where}"
