"""Bearer-token auth: missing, malformed, invalid, revoked tokens; team isolation; logs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from kernelband.auth_tokens import hash_token, hashes_match, mint_token, token_prefix
from kernelband.db import session_scope
from services.api.logs import redact
from services.api.teams import list_tokens, revoke_tokens

Body = Callable[..., dict[str, Any]]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/1", "/v1/fleet", "/v1/jobs/1/events"])
def test_every_v1_endpoint_needs_a_token(client: TestClient, path: str) -> None:
    resp = client.get(path)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"] == "Bearer"
    assert resp.json()["error"] == "missing_token"
    assert "kernelband tokens create" in resp.json()["message"]


@pytest.mark.parametrize("value", ["Bearer nope", "Bearer kb_0000abcd_" + "x" * 43, "Basic abc"])
def test_bad_tokens_are_401(client: TestClient, token: str, value: str) -> None:
    resp = client.get("/v1/jobs", headers={"Authorization": value})
    assert resp.status_code == 401
    assert resp.json()["error"] in ("invalid_token", "missing_token")


def test_revoked_token_is_refused(
    client: TestClient, token: str, factory: sessionmaker[Session]
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get("/v1/jobs", headers=headers).status_code == 200
    with session_scope(factory) as session:
        assert len(revoke_tokens(session, f"kb_{token_prefix(token)}")) == 1
    resp = client.get("/v1/jobs", headers=headers)
    assert resp.status_code == 401 and resp.json()["error"] == "revoked_token"
    with session_scope(factory) as session:
        (info,) = list_tokens(session, "alpha")
        assert info.revoked_at is not None and info.last_used_at is not None


def test_other_teams_job_is_404_everywhere(
    client: TestClient, auth: dict[str, str], job_body: Body, make_token: Callable[[str], str]
) -> None:
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).json()["id"]
    other = {"Authorization": f"Bearer {make_token('beta')}"}
    for path in ("", "/candidates", "/events", "/best?target=h100", "/tracks/h100/bandit"):
        resp = client.get(f"/v1/jobs/{job_id}{path}", headers=other)
        assert resp.status_code == 404, path
        assert resp.json()["error"] == "not_found"
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=other).status_code == 404
    assert client.get("/v1/jobs", headers=other).json()["total"] == 0


def test_tokens_are_stored_hashed_and_compared_in_constant_time() -> None:
    new = mint_token()
    assert new.secret.startswith(f"kb_{new.prefix}_") and token_prefix(new.secret) == new.prefix
    assert new.sha256 == hash_token(new.secret) and new.secret not in new.sha256
    assert hashes_match(new.secret, new.sha256) and not hashes_match(new.secret + "x", new.sha256)


def test_tokens_never_reach_logs(caplog: pytest.LogCaptureFixture) -> None:
    secret = mint_token().secret
    assert redact(f"GET /v1/jobs?t={secret}") == f"GET /v1/jobs?t={secret[:11]}_[REDACTED]"
    assert "[REDACTED]" in redact("Authorization: Bearer abc.def")
    logger = logging.getLogger("uvicorn.access")
    from services.api.logs import install_log_redaction

    install_log_redaction()
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        logger.info('%s - "%s" %d', "127.0.0.1", f"GET /x?token={secret} HTTP/1.1", 200)
    # Other libraries may add their own redaction; the promise is only that the secret is gone.
    assert secret not in caplog.text and "127.0.0.1" in caplog.text
