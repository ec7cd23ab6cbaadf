"""Team webhooks: signed notifications of finished jobs and suites (and optionally new bests).

The deliverer is a process of its own (`kernelband webhooks deliver`), never the scheduler: it
reads the `events` table the scheduler writes, turns the events each hook asked for into rows
of `webhook_deliveries` (once per hook and event), and POSTs them. A delivery that fails (no
answer, or not 2xx) is tried again after a growing delay (tenacity's exponential wait) until
`max_tries`, every try logged on its row with the status or error. A slow receiver delays only
the deliverer; the scheduler never waits for it.

Each request carries `X-KernelBand-Signature: sha256=<hex>`, the HMAC-SHA256 of
`<X-KernelBand-Timestamp>.<body>` with the hook's secret (`signature`; receivers verify with
`verify_signature` or the same three lines).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker
from tenacity import RetryCallState, wait_exponential

from kernelband.db import session_scope
from kernelband.db.models import FINISHED_JOB_STATUSES, Event, Job, Webhook, WebhookDelivery
from kernelband.public_ids import PublicIds, for_session, public_payload

log = logging.getLogger(__name__)

# Which job events become which hook event (suite.finished: the last job of a suite finishing).
_FROM_JOB_EVENT = {"job_finished": "job.finished", "job_cancelled": "job.finished",
                   "new_best": "job.new_best"}


def new_secret() -> str:
    """A hook's signing key, shown to the team once."""
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The X-KernelBand-Signature value of a request body sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_signature(secret: str, timestamp: str, body: bytes, header: str,
                     tolerance_s: float = 300.0) -> bool:
    """What a receiver checks: the signature matches and the timestamp is recent."""
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), header)


def backoff_s(tries: int, base_s: float, max_s: float = 3600.0) -> float:
    """Delay before try `tries + 1`: base, 2 x base, 4 x base, ... up to `max_s`."""
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    state.attempt_number = max(1, tries)
    return float(wait_exponential(multiplier=base_s, max=max_s)(state))


def newest_event_id(session: Session) -> int:
    """Where a new hook's cursor starts: it is never told about the past."""
    return int(session.scalar(select(func.max(Event.id))) or 0)


def enqueue_deliveries(session: Session, batch: int = 500) -> int:
    """Turn events after each live hook's cursor into deliveries; returns how many were added."""
    added, ids = 0, for_session(session)
    for hook in session.scalars(select(Webhook).where(Webhook.revoked_at.is_(None))).all():
        rows = session.execute(
            select(Event, Job).join(Job, Job.id == Event.job_id)
            .where(Job.team_id == hook.team_id, Event.id > hook.cursor_event_id)
            .order_by(Event.id).limit(batch)).all()
        for event, job in rows:
            for kind, payload in _hook_events(session, event, job, ids):
                if kind in hook.events:
                    session.add(WebhookDelivery(webhook_id=hook.id, event_id=event.id, kind=kind,
                                                payload=payload))
                    added += 1
            hook.cursor_event_id = event.id
    session.flush()
    return added


def _hook_events(session: Session, event: Event, job: Job,
                 ids: PublicIds) -> list[tuple[str, dict[str, Any]]]:
    """The hook events of one job event, with public ids (a team never sees row ids)."""
    kind = _FROM_JOB_EVENT.get(event.kind)
    if kind is None:
        return []
    job_ref = ids.encode("job", job.id)
    payload = public_payload(event.payload, ids)
    body = {"job_id": job_ref, "status": job.status, "suite_id": job.suite_id,
            "event": {"seq": event.seq, "kind": event.kind, "payload": payload}}
    out = [(kind, body)]
    if kind == "job.finished" and job.suite_id and _ends_suite(session, event, job):
        out.append(("suite.finished", {"suite_id": job.suite_id, "last_job_id": job_ref}))
    return out


def _ends_suite(session: Session, event: Event, job: Job) -> bool:
    """Whether every job of the suite finished and this is the last of their finishing events
    (so a suite is announced once, however late the deliverer reads the events)."""
    suite_jobs = select(Job.id).where(Job.suite_id == job.suite_id, Job.team_id == job.team_id)
    unfinished = session.scalar(select(func.count(Job.id)).where(
        Job.id.in_(suite_jobs), Job.status.not_in(FINISHED_JOB_STATUSES)))
    last = session.scalar(select(func.max(Event.id)).where(
        Event.job_id.in_(suite_jobs), Event.kind.in_(("job_finished", "job_cancelled"))))
    return not unfinished and last == event.id


@dataclass(frozen=True)
class Outgoing:
    """A claimed delivery, as plain values (sent outside any transaction)."""

    id: int
    public_id: str  # X-KernelBand-Delivery and the body's `id`
    url: str
    secret: str
    kind: str
    body: bytes
    tries: int


def _utc_z(moment: datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def claim_due(session: Session, now: datetime, lease_s: float, limit: int = 50) -> list[Outgoing]:
    """Pending deliveries that are due, pushed `lease_s` ahead so that another deliverer (or
    this one after a crash) takes them only once that lease passed."""
    rows = session.execute(
        select(WebhookDelivery, Webhook).join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
        .where(WebhookDelivery.state == "pending", WebhookDelivery.next_attempt_at <= now)
        .order_by(WebhookDelivery.next_attempt_at).limit(limit)
        .with_for_update(skip_locked=True, of=WebhookDelivery)).all()
    out, ids = [], for_session(session)
    for delivery, hook in rows:
        delivery.next_attempt_at = now + timedelta(seconds=lease_s)
        public_id = ids.encode("dlv", delivery.id)
        message = {"id": public_id, "kind": delivery.kind,
                   "created_at": _utc_z(delivery.created_at), "data": delivery.payload}
        out.append(Outgoing(delivery.id, public_id, hook.url, hook.secret, delivery.kind,
                            json.dumps(message, separators=(",", ":")).encode(), delivery.tries))
    return out


def send(client: httpx.Client, item: Outgoing) -> tuple[int | None, str | None]:
    """POST one delivery; (HTTP status or None, error text or None)."""
    stamp = str(int(time.time()))
    headers = {"Content-Type": "application/json", "User-Agent": "KernelBand-Webhooks/1",
               "X-KernelBand-Event": item.kind, "X-KernelBand-Delivery": item.public_id,
               "X-KernelBand-Timestamp": stamp,
               "X-KernelBand-Signature": signature(item.secret, stamp, item.body)}
    try:
        response = client.post(item.url, content=item.body, headers=headers)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}: {response.text[:200]}"


def record(session: Session, item: Outgoing, status: int | None, error: str | None,
           now: datetime, max_tries: int, base_s: float) -> None:
    """Log one try on the delivery: delivered, retried later, or failed for good."""
    row = session.get_one(WebhookDelivery, item.id)
    row.tries, row.last_status, row.last_error = item.tries + 1, status, error
    if error is None:
        row.state, row.delivered_at = "delivered", now
    elif row.tries >= max_tries:
        row.state = "failed"
    else:
        row.next_attempt_at = now + timedelta(seconds=backoff_s(row.tries, base_s))


def deliver_once(factory: sessionmaker[Session], client: httpx.Client, *, max_tries: int,
                 base_s: float, timeout_s: float) -> int:
    """One pass: enqueue new events, send what is due; returns the tries made."""
    with session_scope(factory) as session:
        enqueue_deliveries(session)
    now = datetime.now(UTC)
    with session_scope(factory) as session:
        due = claim_due(session, now, lease_s=timeout_s + 30)
    for item in due:
        status, error = send(client, item)
        if error:
            log.warning("webhook delivery %s to %s: %s (try %d)", item.public_id, item.url, error,
                        item.tries + 1)
        with session_scope(factory) as session:
            record(session, item, status, error, datetime.now(UTC), max_tries, base_s)
    return len(due)


def deliver_forever(factory: sessionmaker[Session], *, max_tries: int, base_s: float,
                    timeout_s: float, interval_s: float = 1.0) -> None:
    """The deliverer process's loop (`kernelband webhooks deliver`)."""
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        while True:
            try:
                deliver_once(factory, client, max_tries=max_tries, base_s=base_s,
                             timeout_s=timeout_s)
            except Exception:  # a database hiccup must not end the process; the next pass retries
                log.exception("webhook pass failed; retrying in %.1f s", interval_s)
            time.sleep(interval_s)
