"""Tokens over REST and the CLI: scopes (read < submit < admin), expiry, revocation by prefix."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from kernelband.db import session_scope
from kernelband.db.models import ApiToken, utcnow
from services.api.teams import create_token, list_tokens, revoke_tokens

Body = Callable[..., dict[str, Any]]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _new(client: TestClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    resp = client.post("/v1/tokens", json=body, headers=auth)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def test_an_admin_token_lists_creates_and_revokes_the_teams_tokens(
    client: TestClient, auth: dict[str, str], make_token: Callable[[str], str]
) -> None:
    made = _new(client, auth, name="wall", scope="read", expires_in_s=3600)
    assert made["token"].startswith(made["prefix"] + "_") and made["scope"] == "read"
    assert made["expires_at"].endswith("Z") and made["state"] == "active"
    make_token("beta")  # another team's token never shows
    listed = client.get("/v1/tokens", headers=auth).json()["tokens"]
    assert [t["name"] for t in listed] == ["", "wall"] and "token" not in listed[1]
    gone = client.delete(f"/v1/tokens/{made['prefix']}", headers=auth)
    assert gone.status_code == 200 and gone.json()["tokens"][0]["state"] == "revoked"
    assert client.get("/v1/jobs", headers=_bearer(made["token"])).status_code == 401
    again = client.delete(f"/v1/tokens/{made['prefix']}", headers=auth)
    assert again.status_code == 404


def test_a_read_token_reads_but_cannot_submit_cancel_or_manage_tokens(
    client: TestClient, auth: dict[str, str], job_body: Body
) -> None:
    job = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    read = _bearer(_new(client, auth, scope="read")["token"])
    assert client.get(f"/v1/jobs/{job['id']}", headers=read).status_code == 200
    for method, path, body in (("POST", "/v1/jobs", job_body()),
                               ("POST", f"/v1/jobs/{job['id']}/cancel", None),
                               ("PUT", "/v1/skills/settings", {"enabled": False}),
                               ("GET", "/v1/tokens", None)):
        resp = client.request(method, path, json=body, headers=read)
        assert resp.status_code == 403, (path, resp.text)
        assert resp.json()["error"] == "insufficient_scope" and "'read'" in resp.json()["message"]
    submit = _bearer(_new(client, auth, scope="submit")["token"])
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=submit).status_code == 200
    assert client.post("/v1/tokens", json={}, headers=submit).status_code == 403


def test_an_expired_token_is_refused_with_when_it_expired(
    client: TestClient, auth: dict[str, str], factory: sessionmaker[Session]
) -> None:
    made = _new(client, auth, scope="submit", expires_in_s=60)
    assert client.get("/v1/jobs", headers=_bearer(made["token"])).status_code == 200
    with session_scope(factory) as session:
        session.execute(update(ApiToken).where(ApiToken.prefix == made["prefix"][3:])
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    resp = client.get("/v1/jobs", headers=_bearer(made["token"]))
    assert resp.status_code == 401 and resp.json()["error"] == "expired_token"
    assert "expired at" in resp.json()["message"]
    states = {f"kb_{t.prefix}": t.state for t in list_tokens(factory(), "alpha")}
    assert states[made["prefix"]] == "expired"


def test_token_bodies_refuse_unknown_scopes_and_fields(
    client: TestClient, auth: dict[str, str]
) -> None:
    assert client.post("/v1/tokens", json={"scope": "owner"}, headers=auth).status_code == 422
    bad = client.post("/v1/tokens", json={"scopes": ["read"]}, headers=auth)
    assert bad.status_code == 422 and bad.json()["details"][0]["field"] == "scopes"


def test_revoke_by_a_partial_prefix_revokes_every_token_starting_with_it(
    factory: sessionmaker[Session]
) -> None:
    with session_scope(factory) as session:
        tokens = [create_token(session, "alpha") for _ in range(3)]
    prefixes = sorted(t.split("_")[1] for t in tokens)
    with session_scope(factory) as session:
        assert revoke_tokens(session, "kb_") == []  # an empty start matches nothing
        revoked = revoke_tokens(session, f"kb_{prefixes[0][:1]}")
    assert f"kb_{prefixes[0]}" in revoked
    assert all(p.startswith(f"kb_{prefixes[0][:1]}") for p in revoked)


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> str:
    from kernelband.config import get_settings

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("KERNELBAND_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def test_cli_revoke_with_part_of_a_prefix_does_what_its_help_says(cli_env: str) -> None:
    from kernelband.commands.tokens import tokens_app as app

    runner = CliRunner()
    made = runner.invoke(app, ["create", "--team", "b", "--scope", "read",
                               "--expires-days", "1"])
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip().splitlines()[0]
    part = secret[:4]  # "kb_" and the first hex digit
    revoked = runner.invoke(app, ["revoke", part])
    assert revoked.exit_code == 0, revoked.output
    assert secret.split("_")[1] in revoked.stdout
    listed = runner.invoke(app, ["list"])
    assert "revoked" in listed.stdout and "read" in listed.stdout
    none = runner.invoke(app, ["revoke", part])
    assert none.exit_code == 1


def test_the_dashboard_accepts_a_read_token(client: TestClient, auth: dict[str, str],
                                            job_body: Body) -> None:
    job = client.post("/v1/jobs", json=job_body(), headers=auth).json()
    read = _bearer(_new(client, auth, name="wall screen", scope="read")["token"])
    listed = client.get("/ui/api/jobs", headers=read)
    assert listed.status_code == 200 and [j["id"] for j in listed.json()] == [job["id"]]
    for path in (f"/v1/jobs/{job['id']}", f"/v1/jobs/{job['id']}/events",
                 f"/v1/jobs/{job['id']}/candidates", f"/v1/jobs/{job['id']}/stages",
                 "/v1/fleet", "/v1/usage"):
        assert client.get(path, headers=read).status_code == 200, path
