"""Running a suite on a KernelBand server: POST /v1/suites, then poll GET /v1/suites/{id}."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
from rich.console import Console

from kernelband.suite.model import SuiteReport, SuiteSettings, report_from_dict
from kernelband.suite.sources import SuiteSource


class RemoteSuiteError(RuntimeError):
    """The server refused the suite or could not be reached."""


def suite_body(name: str, format: str, sources: Sequence[SuiteSource],
               settings: SuiteSettings) -> dict[str, Any]:
    """The POST /v1/suites JSON body."""
    return {"name": name, "format": format, "targets": list(settings.targets),
            "policies": list(settings.policies), "generator": {"model": settings.model},
            "budget": settings.budget, "parallelism": settings.parallelism,
            "seed": settings.seed, "limits": dict(settings.limits),
            "problems": [{"name": s.name, "source": s.source, "perf_source": s.perf_source}
                         for s in sources]}


def run_remote_suite(server: str, token: str, name: str, format: str,
                     sources: Sequence[SuiteSource], settings: SuiteSettings,
                     console: Console | None = None, poll_s: float = 2.0,
                     timeout_s: float | None = None) -> SuiteReport:
    """Submit the suite and wait until every job finished; returns the final report."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=300) as client:
        created = _check(client.post("/v1/suites", json=suite_body(name, format, sources,
                                                                   settings)))
        suite_id = created["suite_id"]
        if console:
            console.print(f"suite {suite_id} created: {created['jobs']} jobs")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            data = _check(client.get(f"/v1/suites/{suite_id}"))
            if data["finished"] or (deadline is not None and time.monotonic() > deadline):
                return report_from_dict(data)
            time.sleep(poll_s)


def _check(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        try:
            message = response.json().get("message", response.text)
        except ValueError:
            message = response.text
        raise RemoteSuiteError(f"server answered {response.status_code}: {message}")
    data: dict[str, Any] = response.json()
    return data
