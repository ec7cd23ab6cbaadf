"""A team's webhooks: register URLs for job and suite completion, read their delivery log."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, status
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator
from sqlalchemy import select

from kernelband import webhooks
from kernelband.db import session_scope
from kernelband.db.models import Webhook, WebhookDelivery, utcnow
from services.api.deps import AdminTeam, DbDep
from services.api.errors import ERROR_RESPONSES, ApiError, ErrorBody
from services.api.ids import HookId, public
from services.api.timefmt import UtcTime

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses={
    **ERROR_RESPONSES, 403: {"model": ErrorBody, "description": "The token is not an admin token."}})
HookEvent = Literal["job.finished", "suite.finished", "job.new_best"]


class WebhookCreate(BaseModel):
    """POST /v1/webhooks body."""

    model_config = ConfigDict(extra="forbid")
    url: AnyHttpUrl = Field(description="Receives a signed POST per event (http or https).")
    events: list[HookEvent] = Field(
        default_factory=lambda: ["job.finished", "suite.finished"],  # type: ignore[arg-type]
        min_length=1, max_length=3,
        description="job.finished (completed, failed or cancelled), suite.finished (its last "
                    "job finished), job.new_best (every new best kernel of a track).")

    @field_validator("events")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each event may appear once; remove the duplicates")
        return value


class WebhookOut(BaseModel):
    """A registered hook (never its secret)."""

    id: str = Field(description="Public id, hook_ and 13 characters.")
    url: str
    events: list[str]
    created_at: UtcTime
    active: bool


class WebhookCreated(WebhookOut):
    """A new hook: `secret` signs its deliveries and is shown this once."""

    secret: str = Field(description="HMAC-SHA256 key: X-KernelBand-Signature is sha256=<hex> "
                                    "of '<X-KernelBand-Timestamp>.<body>'. Store it now.")


class DeliveryOut(BaseModel):
    """One notification and its last try (`id`: its X-KernelBand-Delivery header)."""

    id: str
    kind: str
    state: Literal["pending", "delivered", "failed"]
    tries: int
    last_status: int | None
    last_error: str | None
    created_at: UtcTime
    next_attempt_at: UtcTime | None
    delivered_at: UtcTime | None


class WebhookList(BaseModel):
    """GET /v1/webhooks."""

    webhooks: list[WebhookOut]


class DeliveryList(BaseModel):
    """GET /v1/webhooks/{id}/deliveries, newest first."""

    deliveries: list[DeliveryOut]


def _out(hook: Webhook) -> WebhookOut:
    return WebhookOut(id=public("hook", hook.id), url=hook.url, events=list(hook.events),
                      created_at=hook.created_at, active=hook.revoked_at is None)


def _team_hook(session: object, team_id: int, hook_id: int) -> Webhook:
    hook = session.get(Webhook, hook_id)  # type: ignore[attr-defined]
    if hook is None or hook.team_id != team_id:
        raise ApiError(404, "not_found", f"Your team has no webhook {public('hook', hook_id)}; "
                       "list them with "
                       "GET /v1/webhooks.")
    return hook  # type: ignore[no-any-return]


@router.post("", status_code=status.HTTP_201_CREATED, summary="Register a webhook (admin)",
             description="Deliveries are sent by the webhook deliverer process "
             "(`kernelband webhooks deliver`), retried with exponential backoff, and logged.")
def create_webhook(body: WebhookCreate, team: AdminTeam, db: DbDep) -> WebhookCreated:
    with session_scope(db) as session:
        hook = Webhook(team_id=team.id, url=str(body.url), secret=webhooks.new_secret(),
                       events=list(body.events),
                       cursor_event_id=webhooks.newest_event_id(session))
        session.add(hook)
        session.commit()
        return WebhookCreated(**_out(hook).model_dump(), secret=hook.secret)


@router.get("", summary="List your team's webhooks (admin)")
def list_webhooks(team: AdminTeam, db: DbDep) -> WebhookList:
    with session_scope(db) as session:
        hooks = session.scalars(select(Webhook).where(Webhook.team_id == team.id)
                                .order_by(Webhook.id)).all()
        return WebhookList(webhooks=[_out(h) for h in hooks])


@router.delete("/{hook_id}", summary="Stop a webhook (admin); its log stays readable")
def delete_webhook(hook_id: HookId, team: AdminTeam, db: DbDep) -> WebhookOut:
    with session_scope(db) as session:
        hook = _team_hook(session, team.id, hook_id)
        if hook.revoked_at is None:
            hook.revoked_at = utcnow()
        session.commit()
        return _out(hook)


@router.get("/{hook_id}/deliveries", summary="A webhook's deliveries and their status (admin)")
def list_deliveries(hook_id: HookId, team: AdminTeam, db: DbDep,
                    limit: Annotated[int, Query(ge=1, le=500)] = 100) -> DeliveryList:
    with session_scope(db) as session:
        _team_hook(session, team.id, hook_id)
        rows = session.scalars(select(WebhookDelivery).where(WebhookDelivery.webhook_id == hook_id)
                               .order_by(WebhookDelivery.id.desc()).limit(limit)).all()
        return DeliveryList(deliveries=[DeliveryOut(
            id=public("dlv", d.id), kind=d.kind, state=d.state, tries=d.tries,  # type: ignore[arg-type]
            last_status=d.last_status, last_error=d.last_error, created_at=d.created_at,
            next_attempt_at=d.next_attempt_at if d.state == "pending" else None,
            delivered_at=d.delivered_at) for d in rows])
