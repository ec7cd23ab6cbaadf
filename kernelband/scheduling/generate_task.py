"""The generate task: one child kernel from (parent, strategy) by the job's generator.

A module of its own so that an LLM worker never loads the sandboxed check and measurement side
(torch, the profile package): `dispatch.task_function` imports only the module of its kind.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernelband.config import get_settings
from kernelband.generate import make_generator
from kernelband.generate.base import Generator
from kernelband.generate.messages import GenerationRequest, ProfileFact, RepairTurn
from kernelband.scheduling.results import GenerateResult
from kernelband.scheduling.task_payload import problem_of, under_job_limits


@under_job_limits
def generate(payload: dict[str, Any]) -> dict[str, Any]:
    """One child kernel from (parent, strategy) by the job's generator (LLM or rules)."""
    return GenerateResult.of(generator(str(payload.get("model") or ""))
                             .generate(generation_request(payload))).to_dict()


def generation_request(payload: dict[str, Any]) -> GenerationRequest:
    """What the generator is asked, from the generate payload (`payloads.task_payloads`)."""
    facts = payload.get("profile_summary") or []
    repair = payload.get("repair")
    return GenerationRequest(
        problem=problem_of(payload), parent_editable=payload["parent_editable"],
        strategy=payload.get("strategy"),
        profile_summary=tuple(ProfileFact(**f) for f in facts if isinstance(f, dict)),
        seed=int(payload.get("seed") or 0), memory=tuple(payload.get("memory") or ()),
        example=payload.get("example") or None,
        repair=RepairTurn.from_dict(repair) if isinstance(repair, dict) and "reply" in repair
        else None, step=str(payload.get("step") or ""))


@lru_cache(maxsize=8)
def generator(model: str) -> Generator:
    """One generator per model per worker process (building one loads prompts and examples)."""
    settings = get_settings()
    if model:
        settings = settings.model_copy(update={"llm_model": model})
    return make_generator(settings)


__all__ = ["generate", "generation_request", "generator"]
