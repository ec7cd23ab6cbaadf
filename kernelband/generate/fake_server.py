"""A scripted OpenAI-compatible server for tests and offline demos (its replies are canned).

Layout of the script directory DIR (the problem and strategy come from the prompt's marker
`<!-- kernelband: problem=NAME strategy=NAME -->`):

    DIR/<problem>/<strategy>.md     always answer with this text
    DIR/<problem>/<strategy>.json   a sequence of steps, consumed one per request; the last repeats
    DIR/<problem>/default.*, DIR/default/<strategy>.*, DIR/default/default.*   fallbacks

A translate step (a KernelBench file as published) is marked `strategy=translate`, so
`DIR/<problem>/translate.*` answers it. On a repair turn (the prompt holds
`<!-- kernelband: repair turn=N -->`) the files
`<strategy>.repair.json|.md` (then `default.repair.*`) are tried first, so a script can answer a
broken first reply with a fix. `--replay EXPORT` serves the replies of a job's transcript export
instead (kernelband.generate.replay).

A step is a JSON object: {"file": "reply.md"} or {"text": "..."} (the reply), optional
"finish_reason" ("length" simulates a truncated reply), {"status": 429} / {"status": 500} /
{"status": 401} (an HTTP error), optional "delay_s". Usage figures are simulated: 1 token per
4 characters.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

_MARKER = re.compile(r"kernelband: problem=(\S+) strategy=(\S+)")
_REPAIR = re.compile(r"kernelband: repair turn=(\d+)")


def repair_turn(prompt: str) -> int:
    """The repair turn a prompt asks for (the last marker), 0 for a first generation."""
    found = _REPAIR.findall(prompt)
    return int(found[-1]) if found else 0


class Script:
    """The replies of DIR and a per-key cursor into each JSON sequence."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise FileNotFoundError(f"script directory {root} does not exist: create it first")
        self.root = root
        self._cursor: dict[Path, int] = {}
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.prompts: list[str] = []  # the full prompt text of each request, in order
        self.in_flight = 0
        self.max_in_flight = 0  # lets tests check a client's concurrency limit

    def _find(self, problem: str, strategy: str, repair: bool = False) -> Path | None:
        kinds = (".repair", "") if repair else ("",)
        for folder, stem in ((problem, strategy), (problem, "default"),
                             ("default", strategy), ("default", "default")):
            for suffix in (f"{kind}{ext}" for kind in kinds for ext in (".json", ".md")):
                path = self.root / folder / f"{stem}{suffix}"
                if path.is_file():
                    return path
        return None

    def next_step(self, problem: str, strategy: str, prompt: str = "") -> dict[str, Any]:
        """The step for this request: a reply, or an HTTP error to send."""
        path = self._find(problem, strategy, repair_turn(prompt) > 0)
        if path is None:
            return {"status": 404, "text": f"no canned reply for problem={problem} strategy={strategy}"}
        if path.suffix == ".md":
            return {"text": path.read_text("utf-8")}
        steps = json.loads(path.read_text("utf-8"))["sequence"]
        with self._lock:
            index = self._cursor.get(path, 0)
            self._cursor[path] = index + 1
        step = dict(steps[min(index, len(steps) - 1)])
        if "file" in step:
            step["text"] = (path.parent / step["file"]).read_text("utf-8")
        return step


def _prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def _completion(model: str, text: str, prompt: str, finish_reason: str) -> dict[str, Any]:
    prompt_tokens, completion_tokens = max(1, len(prompt) // 4), max(1, len(text) // 4)
    return {
        "id": f"chatcmpl-fake-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def _error(status: int, text: str) -> JSONResponse:
    kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status, "server_error")
    return JSONResponse(status_code=status, content={"error": {"message": text, "type": kind, "code": kind}})


def create_app(root: Path | None = None, script: Any = None) -> FastAPI:
    """The FastAPI app serving the script in `root` (or `script`, e.g. a ReplayScript)."""
    if script is None:
        if root is None:
            raise ValueError("create_app needs a script directory or a script object")
        script = Script(root)
    app = FastAPI(title="KernelBand scripted LLM (canned replies)")
    app.state.script = script

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "kernelband"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        prompt = _prompt_text(body)
        match = _MARKER.search(prompt)
        problem, strategy = match.groups() if match else ("default", "default")
        script.requests.append({"problem": problem, "strategy": strategy,
                                "has_key": bool(request.headers.get("authorization"))})
        script.prompts.append(prompt)
        step = script.next_step(problem, strategy, prompt)
        script.in_flight += 1
        script.max_in_flight = max(script.max_in_flight, script.in_flight)
        try:
            await asyncio.sleep(float(step.get("delay_s", 0)))
        finally:
            script.in_flight -= 1
        if "status" in step:
            return _error(int(step["status"]), step.get("text", "scripted failure"))
        return _completion(str(body.get("model", "scripted")), step["text"], prompt,
                           step.get("finish_reason", "stop"))

    return app
