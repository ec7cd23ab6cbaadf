"""The generation-loop benchmark's weak-model script and its labelled results section."""

from __future__ import annotations

import json
from pathlib import Path

from bench import generation_loop
from tests.unit.generate.gen_examples import example_problem


def test_weak_model_script_is_seeded_and_mixes_broken_and_repeated_replies(
        tmp_path: Path) -> None:
    problem = example_problem("vector_add")
    generation_loop.weak_model_script(tmp_path / "a", problem, 40, seed=3)
    generation_loop.weak_model_script(tmp_path / "b", problem, 40, seed=3)
    first = (tmp_path / "a" / "vector_add" / "default.json").read_text()
    assert first == (tmp_path / "b" / "vector_add" / "default.json").read_text()
    texts = [step["text"] for step in json.loads(first)["sequence"]]
    broken = [t for t in texts if "x - y" in t or "-> torch.Tensor\n" in t]
    assert 0.2 < len(broken) / len(texts) < 0.6
    assert any("# elements" in t for t in texts)  # a repeat, reformatted


def test_section_is_labelled_simulated() -> None:
    row = {"config": "repair + dedupe", "pulls": 4, "replies": 5, "repair_turns_sent": 1,
           "measured": 2, "accepted": 2, "correct_rate": 0.5, "duplicates": 1, "evaluations": 6, "tokens": 600,
           "tokens_per_accepted": 300.0, "wall_s": 10.0, "wall_per_accepted_s": 5.0}
    data = {"label": generation_loop.SIMULATED, "pulls": 4, "broken_share": 0.4,
            "fix_share": 0.6, "repeat_share": 0.25, "reply_delay_s": 0.2, "machine": "m",
            "rows": [row]}
    text = generation_loop.section(data)
    assert "SIMULATED" in text and "| repair + dedupe | 4 | 5 | 1 | 2 | 2 | 50% |" in text
