"""Repair feedback is trimmed to what helps and never names a held-out case; secrets are
scrubbed from transcripts; a repair turn continues the conversation it repairs."""

from __future__ import annotations

from kernelband.generate import GenerationRequest
from kernelband.generate.messages import RepairTurn
from kernelband.generate.prompts import render_prompt, request_messages
from kernelband.generate.repair import failure_feedback, is_repairable
from kernelband.generate.scrub import scrub
from tests.unit.generate.gen_examples import example_problem


def test_feedback_keeps_public_details_and_drops_held_out_lines() -> None:
    problem = example_problem("vector_add")
    hidden = problem.held_out_cases[0].name
    public = problem.cases[0]
    result = {"ok": False, "reason": "wrong_result", "verdict": {
        "message": f"wrong_result: case {public.name}, seed 0, output: max_abs_err 7.01 > atol\n"
                   f"also failed on case {hidden} (n=3001)",
        "details": {"max_abs_err": 7.01, "stderr_tail": "Traceback\n  line 3\nValueError: x"}}}
    text = failure_feedback(result, problem)
    assert "reason: wrong_result" in text and "max_abs_err: 7.01" in text
    assert f"first failing case {public.name}" in text and f"dtype={public.dtype}" in text
    assert "ValueError: x" in text
    assert hidden not in text and "3001" not in text


def test_provider_failures_are_not_repaired() -> None:
    assert is_repairable("syntax_error:line 3") and is_repairable("wrong_result")
    assert not is_repairable("rate_limited") and not is_repairable("budget_exhausted")
    assert not is_repairable("server_error:503") and not is_repairable("")


def test_scrub_removes_keys_tokens_and_known_secrets() -> None:
    text = ("key sk-abcdefghijklmnop, token kb_0123456789abcdefXYZ, Bearer abc.def.ghi.jkl, "
            "password=hunter22222 and my-own-secret-value")
    clean = scrub(text, ["my-own-secret-value"])
    for secret in ("sk-abcdefghijklmnop", "kb_0123456789abcdefXYZ", "abc.def.ghi.jkl",
                   "hunter22222", "my-own-secret-value"):
        assert secret not in clean
    assert clean.count("[redacted]") == 5


def test_repair_turn_continues_the_conversation() -> None:
    problem = example_problem("vector_add")
    first = GenerationRequest(problem, problem.editable, "tiling")
    conversation = tuple(render_prompt(first).messages())
    request = GenerationRequest(problem, problem.editable, "tiling", repair=RepairTurn(
        turn=1, conversation=conversation, reply="```python\nbroken\n```",
        feedback="reason: syntax_error:line 1"))
    messages = request_messages(request)
    assert messages[:2] == list(conversation)
    assert messages[2] == {"role": "assistant", "content": "```python\nbroken\n```"}
    assert messages[3]["content"].startswith("<!-- kernelband: repair turn=1 -->")
    assert "reason: syntax_error:line 1" in messages[3]["content"]
    assert GenerationRequest.from_dict(request.to_dict()) == request
