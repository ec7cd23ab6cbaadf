"""A KernelBench file as published needs an LLM to translate it: without `generator.model`,
POST /v1/jobs and POST /v1/suites refuse it at once (422 llm_model_required)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

Body = Callable[..., dict[str, Any]]
PUBLISHED = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
             "    def forward(self, x):\n        return torch.relu(x)\n\n\n"
             "def get_inputs():\n    return [torch.randn(4, 4)]\n\n\n"
             "def get_init_inputs():\n    return []\n")


def test_job_on_a_published_file_without_a_model_is_refused(
        client: TestClient, auth: dict[str, str], job_body: Body) -> None:
    problem = {"source": PUBLISHED, "format": "kernelbench", "name": "relu"}
    resp = client.post("/v1/jobs", json=job_body(problem=problem), headers=auth)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "llm_model_required"
    assert "only an LLM generator can do" in body["message"] and "generator.model" in body["message"]


def test_suite_with_published_files_without_a_model_is_refused(
        client: TestClient, auth: dict[str, str]) -> None:
    body = {"name": "kb", "format": "kernelbench", "targets": ["cpu"], "budget": 2,
            "problems": [{"name": "relu", "source": PUBLISHED}]}
    resp = client.post("/v1/suites", json=body, headers=auth)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "llm_model_required"
    assert "1 of 1 files (relu) need translation" in resp.json()["message"]
