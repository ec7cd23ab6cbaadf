"""Start the scripted OpenAI-compatible server on a free port in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from kernelband.generate.fake_server import Script, create_app

REPLIES = Path(__file__).parent / "fake_llm_replies"


@dataclass
class FakeLLM:
    """A running scripted server: its base URL for litellm and the requests it received."""

    api_base: str
    script: Script  # or a ReplayScript: both record requests and prompts


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_fake_llm(root: Path | None = REPLIES, script: Any = None) -> Iterator[FakeLLM]:
    """Serve `root` (or `script`, e.g. a ReplayScript) over real HTTP until the block exits."""
    app = create_app(root, script=script)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the scripted LLM server did not start on port {port}")
        time.sleep(0.02)
    try:
        yield FakeLLM(api_base=f"http://127.0.0.1:{port}/v1", script=app.state.script)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
