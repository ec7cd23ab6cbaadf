"""Screenshots of a saved dashboard snapshot (bench/gpu/fleet_snapshot.py), rendered offline.

    python -m bench.gpu.render_dashboard bench/gpu/runs/fleet1/snapshot-mid --out DIR

Serves the snapshot's saved pages, assets and JSON answers on 127.0.0.1 exactly as the API
answered them at capture time, opens the pages in Debian's Chromium through Playwright (the
browser clock fixed at the capture time, so ages read as they did then) and writes one PNG
per page plus screenshots.md. Each image carries a banner, and each caption says, that it was
rendered from responses captured mid-run on the run's machine, not a live view.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
LATER_EVENTS = re.compile(r"^/v1/jobs/\d+/events\?after=(\d+)")
SOURCE = re.compile(r"^/ui/api/jobs/(\d+)/candidates/(\d+)/source$")
NO_SOURCE = "# kernel source not saved in the snapshot (the problems may come from a corpus)"
PAGE_NAMES = (("/ui/jobs/", "job"), ("/ui/suites/", "suite"), ("/ui/fleet", "fleet"),
              ("/ui/suites", "suites"), ("/ui/jobs", "jobs"))


def answer(manifest: dict[str, Any], root: Path, url: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for `url` from the snapshot.

    A poll for events after the saved ones gets an empty page (nothing happened after the
    capture); anything not captured gets a 404 that says so.
    """
    entry = manifest["responses"].get(url)
    if entry and entry.get("file"):
        return int(entry["status"]), str(entry["content_type"]), (root / entry["file"]).read_bytes()
    source = SOURCE.match(url)
    if source:
        return 200, "application/json", json.dumps(_no_source(manifest, root, source)).encode()
    later = LATER_EVENTS.match(url)
    if later and int(later.group(1)) > 0:
        after = int(later.group(1))
        body = {"events": [], "next_after": after, "has_more": False}
        return 200, "application/json", json.dumps(body).encode()
    body = {"error": "not_captured", "message": f"{url} was not captured in this snapshot."}
    return 404, "application/json", json.dumps(body).encode()


def _no_source(manifest: dict[str, Any], root: Path, match: re.Match[str]) -> dict[str, Any]:
    """The diff panel's answer without code: the candidate's facts from the saved list."""
    job_id, candidate_id = int(match.group(1)), int(match.group(2))
    entry = manifest["responses"].get(f"/v1/jobs/{job_id}/candidates?limit=1000&offset=0")
    found: dict[str, Any] = {}
    if entry and entry.get("file"):
        saved = json.loads((root / entry["file"]).read_text())
        found = next((c for c in saved.get("candidates", []) if c.get("id") == candidate_id), {})
    return {"candidate_id": candidate_id, "target": found.get("target", "?"),
            "status": found.get("status", "?"), "reason": found.get("reason"),
            "strategy": found.get("strategy"), "editable": NO_SOURCE,
            "original_editable": NO_SOURCE, "problem_name": None}


@contextmanager
def serve_snapshot(root: Path) -> Iterator[str]:
    """An HTTP server for the snapshot in `root` on a free port; yields its base URL."""
    manifest = json.loads((root / "manifest.json").read_text())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            status, content_type, body = answer(manifest, root, self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def banner_text(manifest: dict[str, Any]) -> str:
    """What every image and caption says about where it comes from."""
    when = datetime.fromtimestamp(float(manifest["captured_at"]), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f"SNAPSHOT, not a live view: rendered offline from the API responses captured "
            f"{manifest.get('moment', 'mid-run')} (t = {manifest.get('t_s', '?')} s) on "
            f"{manifest.get('device') or 'the run machine'}, target {manifest.get('target')}, "
            f"at {when}")


def page_name(url: str) -> str:
    return next((name for prefix, name in PAGE_NAMES if url.startswith(prefix)), "page")


def _add_banner(page: Any, text: str) -> None:
    page.evaluate("""(text) => {
        const b = document.createElement('div');
        b.textContent = text;
        b.style.cssText = 'background:#fff3bf;border:2px solid #e8590c;color:#000;' +
          'font:bold 13px sans-serif;padding:6px 10px;margin:0 0 8px 0';
        document.body.prepend(b);
    }""", text)


def render(root: Path, out: Path, chromium: Path = CHROMIUM, width: int = 1400,
           only: tuple[str, ...] = ()) -> list[Path]:
    """One full-page PNG per captured page (or per page named in `only`: job, suite, fleet,
    jobs, suites), plus screenshots.md with captions."""
    from playwright.sync_api import sync_playwright

    if not chromium.exists():
        raise SystemExit(f"{chromium} is missing: install Debian's Chromium "
                         "(`make browser-deps`) or pass --chromium PATH")
    manifest = json.loads((root / "manifest.json").read_text())
    text = banner_text(manifest)
    pages = [u for u in manifest["pages"] if not only or page_name(u) in only]
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    with serve_snapshot(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": width, "height": 900}, timezone_id="UTC")
        context.add_init_script("sessionStorage.setItem('kb_token', 'kb_snapshot')")
        for url in pages:
            page = context.new_page()
            page.clock.set_fixed_time(datetime.fromtimestamp(float(manifest["captured_at"]), UTC))
            page.goto(base + url)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(1000)
            _add_banner(page, text)
            path = out / f"{manifest.get('moment', 'snapshot').split()[0]}-{page_name(url)}.png"
            page.screenshot(path=str(path), full_page=True)
            shots.append(path)
            page.close()
        browser.close()
    (out / "screenshots.md").write_text(_captions(shots, pages, manifest, text))
    return shots


def _captions(shots: list[Path], pages: list[str], manifest: dict[str, Any], text: str) -> str:
    lines = ["# Dashboard screenshots", "", f"{text}.", "",
             "Rendered by `python -m bench.gpu.render_dashboard` in headless Chromium from the "
             "saved snapshot (pages, scripts and the JSON answers they poll, as served at capture "
             f"time); suite {manifest.get('suite_id')}, featured job {manifest.get('job_id')}.", ""]
    for shot, url in zip(shots, pages, strict=True):
        lines += [f"![{page_name(url)} page, snapshot]({shot.name})", "",
                  f"*{url}: rendered from responses captured {manifest.get('moment')} on "
                  f"{manifest.get('device')}.*", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", type=Path, help="a snapshot folder with manifest.json")
    parser.add_argument("--out", type=Path, default=None, help="where the PNGs go (default: "
                        "the snapshot's parent folder)")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
    parser.add_argument("--pages", default="job,suite,fleet",
                        help="comma-separated: job, suite, fleet, jobs, suites (default "
                             "job,suite,fleet; empty: every captured page)")
    args = parser.parse_args(argv)
    if not (args.snapshot / "manifest.json").is_file():
        raise SystemExit(f"{args.snapshot} has no manifest.json; pass the snapshot-mid folder "
                         "that bench/gpu/fleet_one_gpu.py wrote")
    only = tuple(p.strip() for p in args.pages.split(",") if p.strip())
    for path in render(args.snapshot, args.out or args.snapshot.parent, args.chromium, only=only):
        print(path)


if __name__ == "__main__":
    main()
