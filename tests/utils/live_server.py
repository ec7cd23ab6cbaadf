"""Serve an ASGI app over real HTTP from a uvicorn thread, for tests that act as a client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.utils.fake_llm import free_port


@contextmanager
def serve_in_thread(app: Any, start_timeout_s: float = 30.0) -> Iterator[str]:
    """Run `app` on a free local port; yields its base URL and stops the server on exit."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the test server did not start within {start_timeout_s:.0f} s")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
