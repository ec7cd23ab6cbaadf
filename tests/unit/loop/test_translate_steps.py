"""KernelBench files as published, end to end over real HTTP (scripted LLM server): the first
pull of a track translates the PyTorch Model into Triton with its own prompt, a failed
translation is translated again, later pulls optimize the translation, and a track that never
got a translation is not credited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loop_kit import events, make_llm_job, reply, run_job, scripted_llm
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db import repository
from kernelband.db.models import Attempt, Candidate, Measurement
from kernelband.db.session import session_scope
from kernelband.problem.model import KernelProblem
from kernelband.problem.translate import PLACEHOLDER_REGION
from kernelband.sandbox import load_problem_sandboxed

# A KernelBench level-1 file as published: a PyTorch Model, sizes, get_inputs, no Triton.
PUBLISHED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Simple model that performs a ReLU activation."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 16
dim = 200


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''

TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        return out


BLOCK = 64
'''

# A "translation" that keeps the torch computation (its kernel is never launched): refused.
TORCH_ONLY = TRITON.replace('''        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK_SIZE=BLOCK)
        return out''', "        return torch.relu(x)")


@pytest.fixture(scope="module")
def published() -> KernelProblem:
    return load_problem_sandboxed(PUBLISHED, "kernelbench", "relu")


def _script(root: Path, translations: list[str], optimizations: list[str]) -> Path:
    folder = root / "relu"
    folder.mkdir(parents=True, exist_ok=True)
    for name, texts in (("translate", translations), ("default", optimizations)):
        steps = [{"text": reply(t)} for t in texts]
        (folder / f"{name}.json").write_text(json.dumps({"sequence": steps}))
    return root


def _generate_steps(session: Session, job_id: int) -> list[str | None]:
    query = select(Attempt).where(Attempt.job_id == job_id, Attempt.kind == "generate")
    return [a.payload.get("step") for a in session.scalars(query.order_by(Attempt.id))]


def test_published_file_loads_with_the_pytorch_placeholder(published: KernelProblem) -> None:
    assert published.needs_translation and published.entry == "ModelNew"
    assert published.editable == PLACEHOLDER_REGION and published.kernel_names == ()
    assert published.source.startswith(PUBLISHED.rstrip("\n"))
    assert "translates Model into a Triton ModelNew" in published.description


def test_translate_then_retranslate_then_optimize(
        db_factory: sessionmaker[Session], published: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    sqlite_factory = db_factory  # the same test on SQLite and Postgres
    root = _script(tmp_path, [TORCH_ONLY, TRITON], [TRITON.replace("BLOCK = 64", "BLOCK = 32")])
    with scripted_llm(monkeypatch, root) as fake:
        job_id = make_llm_job(sqlite_factory, published, budget_iterations=3, repair_turns=0)
        run_job(sqlite_factory, job_id)
    prompts = fake.script.prompts
    assert len(prompts) == 3
    for prompt in prompts[:2]:  # both translate prompts: the PyTorch source, not the placeholder
        assert "strategy=translate" in prompt and "Translate the PyTorch model" in prompt
        assert "return torch.relu(x)" in prompt and "Placeholder" not in prompt
    # the failed translation is remembered in the next translate prompt
    assert "earlier translation" in prompts[1] and "decoy_no_triton_launch" in prompts[1]
    assert "strategy=translate" not in prompts[2] and "relu_kernel" in prompts[2]
    with session_scope(sqlite_factory) as session:
        assert _generate_steps(session, job_id) == ["translate", "translate", None]
        selected = events(session, job_id, "pull_selected")
        assert [e.get("step") for e in selected] == ["translate", "translate", None]
        track = repository.job_tracks(session, job_id)[0]
        baseline = session.scalars(select(Measurement).where(
            Measurement.candidate_id == track.original_candidate_id)).one()
        assert baseline.label == "estimated" and "PyTorch eager roofline" in baseline.method
        children = session.scalars(select(Candidate).where(
            Candidate.track_id == track.id, Candidate.id != track.original_candidate_id)
            .order_by(Candidate.id)).all()
        assert [c.status for c in children] == ["rejected", "measured", "measured"]
        assert children[2].parent_id == children[1].id  # optimizes the translation
        assert track.best_candidate_id in (children[1].id, children[2].id)
        assert track.status == "completed" and track.held_out == "passed"


def test_track_without_a_translation_is_not_credited(
        sqlite_factory: sessionmaker[Session], published: KernelProblem, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = _script(tmp_path, [TORCH_ONLY], [])
    with scripted_llm(monkeypatch, root):
        job_id = make_llm_job(sqlite_factory, published, budget_iterations=1, repair_turns=0)
        run_job(sqlite_factory, job_id)
    with session_scope(sqlite_factory) as session:
        track = repository.job_tracks(session, job_id)[0]
        assert track.best_candidate_id == track.original_candidate_id
        assert track.held_out == "untranslated"
        assert "no Triton translation" in (track.held_out_reason or "")
