"""Save what the dashboard shows mid-run: its pages, their assets and the JSON they poll.

The dashboard is static HTML plus scripts that fetch JSON with the team token. A snapshot is
those exact responses, fetched at one moment, with a manifest mapping each URL (path and
query, as the scripts ask for it) to its file; bench/gpu/render_dashboard.py serves them
back to a browser elsewhere. The token itself is never saved, nor any kernel source.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx

STATIC_REF = re.compile(r"""(?:src|href)="(/ui/static/[A-Za-z0-9_.\-]+)\"""")
MANIFEST = "manifest.json"


def _job_urls(job: dict[str, Any]) -> list[str]:
    """The URLs the job page polls, in the form job.js builds them."""
    jid = job["id"]
    urls = [f"/ui/jobs/{jid}", f"/v1/jobs/{jid}", f"/v1/jobs/{jid}/stages",
            f"/v1/jobs/{jid}/candidates?limit=1000&offset=0",
            f"/v1/jobs/{jid}/events?after=0&limit=1000"]
    # Not the kernel source behind the diff panel: problems may come from a corpus that must
    # not be copied into the project (render_dashboard.py shows a placeholder there).
    return urls + [f"/v1/jobs/{jid}/tracks/{target}/bandit" for target in job.get("targets", [])]


def featured_job(jobs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The job worth a screenshot: running first, then the most iterations done."""
    def score(job: dict[str, Any]) -> tuple[int, int]:
        done = sum(int(t.get("iterations_done") or 0) for t in job.get("tracks", []))
        return (job.get("status") == "running", done)

    return max(jobs, key=score) if jobs else None


def snapshot_urls(suite_id: str, jobs: list[dict[str, Any]]) -> list[str]:
    """Pages and JSON of the suite, the featured job, the jobs list and the fleet."""
    urls = [f"/ui/suites/{suite_id}", f"/v1/suites/{suite_id}", "/ui/jobs", "/ui/api/jobs?",
            "/ui/suites", "/ui/api/suites", "/ui/fleet", "/v1/fleet"]
    job = featured_job(jobs)
    return urls + (_job_urls(job) if job else [])


def capture(client: httpx.Client, out_dir: Path, suite_id: str,
            context: dict[str, Any]) -> dict[str, Any]:
    """Fetch every snapshot URL into out_dir; returns (and writes) the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    jobs = client.get("/ui/api/jobs?").json()
    urls = snapshot_urls(suite_id, jobs if isinstance(jobs, list) else [])
    entries: dict[str, dict[str, Any]] = {}
    for url in urls:
        _fetch(client, url, out_dir, entries)
    for url in sorted({ref for e in list(entries.values()) if e["file"].endswith(".html")
                       for ref in STATIC_REF.findall((out_dir / e["file"]).read_text())}):
        _fetch(client, url, out_dir, entries)
    job = featured_job(jobs if isinstance(jobs, list) else [])
    manifest = {"captured_at": started, "capture_s": round(time.time() - started, 3),
                "suite_id": suite_id, "job_id": job["id"] if job else None,
                "pages": [u for u in urls if u.startswith("/ui/") and "/api/" not in u],
                "responses": entries, **context}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def _fetch(client: httpx.Client, url: str, out_dir: Path,
           entries: dict[str, dict[str, Any]]) -> None:
    if url in entries:
        return
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        entries[url] = {"file": "", "status": 0, "content_type": "", "error": str(exc)}
        return
    content_type = response.headers.get("content-type", "application/octet-stream")
    suffix = _suffix(url, content_type)
    name = f"r{len(entries):03d}{suffix}"
    (out_dir / name).write_bytes(response.content)
    entries[url] = {"file": name, "status": response.status_code, "content_type": content_type}


def _suffix(url: str, content_type: str) -> str:
    if "json" in content_type:
        return ".json"
    if "html" in content_type:
        return ".html"
    return Path(url.split("?", 1)[0]).suffix or ".bin"
