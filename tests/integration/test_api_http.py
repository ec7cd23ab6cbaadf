"""The API started with the documented hand command, on Postgres, spoken to over real HTTP."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kernelband.auth_tokens import mint_token
from tests.utils.api_process import api_process, rss_bytes
from tests.utils.processes import ManagedProcess
from tests.utils.public_ids import row_id

pytestmark = pytest.mark.integration

BOOTSTRAP = mint_token().secret
CHUNK = b"x" * (64 * 1024)
HUNDRED_MB = 100 * 1024 * 1024


@pytest.fixture(scope="module")
def server(postgres_url: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[str, ManagedProcess]]:
    logs = tmp_path_factory.mktemp("api-http")
    with api_process(postgres_url, logs, KERNELBAND_BOOTSTRAP_TOKEN=BOOTSTRAP,
                     KERNELBAND_SSE_HEARTBEAT_S="1") as started:
        yield started


def test_the_bootstrap_token_works_with_the_hand_started_api(
    server: tuple[str, ManagedProcess]
) -> None:
    url, _ = server
    resp = httpx.get(f"{url}/v1/jobs", headers={"Authorization": f"Bearer {BOOTSTRAP}"})
    assert resp.status_code == 200, resp.text
    assert httpx.get(f"{url}/v1/jobs").status_code == 401


def _send_chunked(url: str, total: int) -> tuple[int, bytes]:
    """POST `total` bytes as a chunked body until the server answers; (bytes sent, answer)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    sent, frame = 0, f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n"
    try:
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered: stop, as a client reading its answer would
            sock.sendall(frame)
            sent += len(CHUNK)
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = b""
    sock.settimeout(10)
    try:
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and answer.rstrip().endswith(b"}"):
                break
    except (ConnectionResetError, TimeoutError):
        pass
    sock.close()
    return sent, answer


def test_a_chunked_100_mb_body_gets_413_at_the_limit_without_growing_the_server(
    server: tuple[str, ManagedProcess], tmp_path: Path
) -> None:
    url, proc = server
    _send_chunked(url, 4 * 1024 * 1024)  # warm the code paths once before measuring
    baseline, peak, done = rss_bytes(proc.popen.pid), 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_bytes(proc.popen.pid))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        sent, answer = _send_chunked(url, HUNDRED_MB)
    finally:
        done.set()
        sampler.join()
    growth = peak - baseline
    print(f"chunked 100 MB: sent {sent / 2**20:.1f} MB before the answer; server RSS "
          f"{baseline / 2**20:.1f} MB -> peak {peak / 2**20:.1f} MB (+{growth / 2**20:.2f} MB)")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"payload_too_large" in answer and b"at most" in answer
    assert sent < 32 * 1024 * 1024, "the server kept reading long past its limit"
    assert growth < 10 * 1024 * 1024


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
ADMIN = {"Authorization": f"Bearer {BOOTSTRAP}"}


def _job_body() -> dict[str, object]:
    return {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
            "targets": ["cpu"], "budget": {"iterations": 1}}


def test_token_scopes_and_expiry_over_http(
    server: tuple[str, ManagedProcess], postgres_url: str
) -> None:
    from sqlalchemy import update

    from kernelband.db import make_engine, make_session_factory, session_scope
    from kernelband.db.models import ApiToken, utcnow

    url, _ = server
    with httpx.Client(base_url=url, timeout=60) as http:
        job = http.post("/v1/jobs", json=_job_body(), headers=ADMIN)
        assert job.status_code == 201, job.text
        job_id = job.json()["id"]
        made = http.post("/v1/tokens", json={"name": "wall", "scope": "read",
                                             "expires_in_s": 600}, headers=ADMIN).json()
        read = {"Authorization": f"Bearer {made['token']}"}
        assert http.get(f"/v1/jobs/{job_id}", headers=read).status_code == 200
        assert http.post("/v1/jobs", json=_job_body(), headers=read).status_code == 403
        assert http.post(f"/v1/jobs/{job_id}/cancel", headers=read).status_code == 403
        assert http.get("/v1/tokens", headers=read).status_code == 403
        engine = make_engine(postgres_url)
        with session_scope(make_session_factory(engine)) as session:
            session.execute(update(ApiToken).where(ApiToken.prefix == made["prefix"][3:])
                            .values(expires_at=utcnow()))
        engine.dispose()
        expired = http.get(f"/v1/jobs/{job_id}", headers=read)
        assert expired.status_code == 401 and expired.json()["error"] == "expired_token"
        assert http.post(f"/v1/jobs/{job_id}/cancel", headers=ADMIN).status_code == 200


def _append_events(postgres_url: str, public_job_id: str, count: int, pause_s: float) -> None:
    """What the scheduler does for a running job: numbered events, the job's version bumped
    in the same transaction; the last one finishes the job."""
    from sqlalchemy import update

    from kernelband.db import make_engine, make_session_factory, session_scope
    from kernelband.db.models import Event, Job

    engine = make_engine(postgres_url)
    factory = make_session_factory(engine)
    job_id = row_id(factory, public_job_id)
    with session_scope(factory) as session:
        session.execute(update(Job).where(Job.id == job_id).values(status="running"))
    for seq in range(1, count + 1):
        time.sleep(pause_s)
        last = seq == count
        with session_scope(factory) as session:
            session.add(Event(job_id=job_id, seq=seq, kind="job_finished" if last else "candidate",
                              payload={"n": seq}))
            values: dict[str, object] = {"version": Job.version + 1}
            if last:
                values["status"] = "completed"
            session.execute(update(Job).where(Job.id == job_id).values(**values))
    engine.dispose()


def _read_stream(http: httpx.Client, path: str, last_id: int | None,
                 stop_after: int | None) -> tuple[list[tuple[int, str]], int]:
    """(id, event) pairs read from an event stream, and the heartbeats seen; stops (drops the
    connection) after `stop_after` events, else reads to the end of the stream."""
    headers = {**ADMIN, "Accept": "text/event-stream"}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    got: list[tuple[int, str]] = []
    beats, current = 0, {}
    with http.stream("GET", path, headers=headers) as resp:
        assert resp.status_code == 200, resp.read()
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith(": heartbeat"):
                beats += 1
            elif line.startswith(("id: ", "event: ")):
                key, _, value = line.partition(": ")
                current[key] = value
            elif line == "" and "id" in current:
                got.append((int(current["id"]), current["event"]))
                current = {}
                if stop_after is not None and len(got) >= stop_after:
                    break
    return got, beats


def test_an_event_stream_delivers_every_event_in_order_and_resumes_without_loss(
    server: tuple[str, ManagedProcess], postgres_url: str
) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=60) as http:
        job_id = http.post("/v1/jobs", json=_job_body(), headers=ADMIN).json()["id"]
        writer = threading.Thread(target=_append_events, args=(postgres_url, job_id, 12, 0.15))
        writer.start()
        try:
            path = f"/v1/jobs/{job_id}/events"
            first, _ = _read_stream(http, path, None, stop_after=5)  # then the line drops
            time.sleep(0.6)  # events keep arriving while the client is away
            rest, _ = _read_stream(http, path, first[-1][0], stop_after=None)
        finally:
            writer.join()
        assert [seq for seq, _ in first + rest] == list(range(1, 13))  # no loss, no repeat
        assert rest[-1] == (12, "job_finished")
        done = http.get(path, headers={**ADMIN, "Accept": "text/event-stream",
                                       "Last-Event-ID": "12"})
        assert done.status_code == 204  # an EventSource stops reconnecting
        page = http.get(path, headers=ADMIN).json()  # the polled page is unchanged
        assert [e["seq"] for e in page["events"]] == list(range(1, 13))


def test_an_idle_event_stream_sends_heartbeats(server: tuple[str, ManagedProcess]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=30) as http:
        job_id = http.post("/v1/jobs", json=_job_body(), headers=ADMIN).json()["id"]
        headers = {**ADMIN, "Accept": "text/event-stream"}
        with http.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as resp:
            lines = []
            for line in resp.iter_lines():
                lines.append(line)
                if line.startswith(": heartbeat"):
                    break
        assert lines[0] == "retry: 2000" and lines[-1] == ": heartbeat"


def test_usage_sums_match_the_attempts_and_a_quota_gives_429_over_http(
    server: tuple[str, ManagedProcess], postgres_url: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from kernelband import usage
    from kernelband.db import make_engine, make_session_factory, session_scope
    from kernelband.db.models import Attempt, Job, LlmUsage, Team, Track

    url, _ = server
    with httpx.Client(base_url=url, timeout=60) as http:
        team = "usage-team"
        engine = make_engine(postgres_url)
        factory = make_session_factory(engine)
        from services.api.teams import create_token

        with session_scope(factory) as s:
            token = create_token(s, team, scope="submit")
        auth = {"Authorization": f"Bearer {token}"}
        job_id = http.post("/v1/jobs", json=_job_body(), headers=auth).json()["id"]
        job_row = row_id(factory, job_id)
        now = datetime.now(UTC)
        spans = [("gpu.h100", 2.5), ("gpu.h100", 4.0), ("cpu", 1.5)]
        with session_scope(factory) as s:
            track = Track(job_id=job_row, target="cpu", status="running")
            s.add(track)
            s.flush()
            s.add_all([Attempt(job_id=job_row, track_id=track.id, kind="profile", state="done",
                               queue=q, started_at=now - timedelta(seconds=sec), finished_at=now)
                       for q, sec in spans])
            s.add(LlmUsage(job_id=job_row, model="m", tokens=321, usd=0.5, created_at=now))
        body = http.get("/v1/usage", params={"days": 1}, headers=auth).json()
        (job,) = [j for j in body["jobs"] if j["job_id"] == job_id]
        assert job["gpu_s"] == {"h100": 6.5} and job["cpu_s"] == 1.5
        assert job["llm_tokens"] == 321 and job["usd"] == 0.5
        with session_scope(factory) as s:
            usage.set_quotas(s, s.query(Team).filter_by(name=team).one().id, usd_per_day=0.25)
        refused = http.post("/v1/jobs", json=_job_body(), headers=auth)
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
        assert "usd_per_day" in refused.json()["message"] and refused.headers["retry-after"]
        with session_scope(factory) as s:
            s.query(Job).filter_by(id=job_row).update({"status": "cancelled"})
        engine.dispose()


def test_a_stream_ends_when_its_token_is_revoked(server: tuple[str, ManagedProcess]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=30) as http:
        job_id = http.post("/v1/jobs", json=_job_body(), headers=ADMIN).json()["id"]
        made = http.post("/v1/tokens", json={"scope": "read"}, headers=ADMIN).json()
        headers = {"Authorization": f"Bearer {made['token']}", "Accept": "text/event-stream"}
        started = time.monotonic()
        with http.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers) as resp:
            assert resp.status_code == 200
            revoked = False
            for line in resp.iter_lines():
                if line.startswith(": heartbeat") and not revoked:
                    http.delete(f"/v1/tokens/{made['prefix']}", headers=ADMIN)
                    revoked = True
        assert revoked and time.monotonic() - started < 20  # ended at the next heartbeat
        again = http.get(f"/v1/jobs/{job_id}/events", headers=headers)
        assert again.status_code == 401 and again.json()["error"] == "revoked_token"
