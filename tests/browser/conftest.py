"""Browser-test fixtures: the real app (uvicorn thread, SQLite, embedded scheduler) and headless
Chromium driven by Playwright. A missing Chromium FAILS the tests: run `make browser-deps`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.utils.live_server import serve_in_thread

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"


@dataclass
class LiveServer:
    """A running dashboard: its URL, database and two teams' tokens."""

    url: str
    factory: sessionmaker[Session]
    token: str
    other_token: str


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """uvicorn in a thread with the embedded scheduler, like `kernelband serve`."""
    from kernelband.config import Settings
    from kernelband.db import open_database, session_scope
    from services.api.app import create_app
    from services.api.embedded import EmbeddedScheduler
    from services.api.teams import create_token

    data = tmp_path_factory.mktemp("dashboard")
    settings = Settings(data_dir=data, database_url="", broker_url="", poll_interval_s=0.1)
    url = settings.effective_database_url
    _, factory = open_database(url, migrate=True)
    with session_scope(factory) as session:
        token, other = create_token(session, "alpha"), create_token(session, "beta")
    app = create_app(settings, session_factory=factory, embedded=True)
    scheduler = EmbeddedScheduler(factory, settings, workers=2)
    scheduler.start()
    with serve_in_thread(app) as base_url:
        yield LiveServer(base_url, factory, token, other)
    scheduler.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Debian Chromium; never downloads a browser.

    Module scope: Playwright's sync API keeps an event loop running in this thread while it is
    open, which would break `asyncio.run` in every later test of the session.
    """
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's Chromium. "
                    "Install it with `make browser-deps` (apt-get install chromium chromium-driver).")
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def sign_in(page: object, server: LiveServer, token: str | None = None) -> None:
    """Sign in through the form, as a person would."""
    page.goto(server.url + "/ui/signin")  # type: ignore[attr-defined]
    page.fill("#token", token or server.token)  # type: ignore[attr-defined]
    page.click("button[type=submit]")  # type: ignore[attr-defined]
    page.wait_for_url("**/ui/jobs")  # type: ignore[attr-defined]


@pytest.fixture
def page(browser: object, live_server: LiveServer) -> Iterator[object]:
    """A fresh signed-in tab (own context, so sessionStorage starts empty)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    sign_in(tab, live_server)
    yield tab
    context.close()


def shot(page: object, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/browser/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    return path
