"""The job page follows its job through the pushed event stream, with polling switched off."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.browser.conftest import REPO, LiveServer, shot

pytestmark = pytest.mark.browser
EXAMPLE = REPO / "examples" / "vector_add.py"


def test_the_job_page_updates_from_the_event_stream_with_polling_disabled(
    page: Any, live_server: LiveServer
) -> None:
    body = {"problem": {"source": EXAMPLE.read_text(), "name": "vector_add"},
            "targets": ["cpu"], "budget": {"iterations": 3}, "parallelism": 1}
    created = httpx.post(live_server.url + "/v1/jobs", json=body, timeout=120,
                         headers={"Authorization": f"Bearer {live_server.token}"})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    event_requests: list[tuple[str, str]] = []
    page.on("request", lambda r: event_requests.append((r.url, r.headers.get("accept", "")))
            if "/events" in r.url else None)
    page.goto(f"{live_server.url}/ui/jobs/{job_id}?transport=stream")
    page.wait_for_function("document.getElementById('poll-info').textContent.includes('pushed')",
                           timeout=120_000)
    page.wait_for_function("document.getElementById('job-status').textContent.includes('completed')"
                           " || document.getElementById('job-status').textContent.includes('failed')",
                           timeout=240_000)
    shot(page, "job-streamed")
    assert event_requests, "the page never asked for its events"
    assert all("text/event-stream" in accept for _, accept in event_requests), event_requests
    final = httpx.get(f"{live_server.url}/v1/jobs/{job_id}/events?limit=1000",
                      headers={"Authorization": f"Bearer {live_server.token}"}).json()
    last = final["events"][-1]["seq"]
    page.wait_for_function("document.getElementById('poll-info').textContent"
                           f".includes('events up to #{last} ')")
    assert page.evaluate("window.kbPerf.length") >= 1
