"""One-shot retrieval over the built-in example bank and a team's skill library together.

BM25 over each example's description and code (the built-in bank's title and `before`, a team
entry's description and parent code), restricted to the requested strategy; the best match
is the prompt's example. Pure: the scheduler passes the team's entries in.
"""

from __future__ import annotations

from collections.abc import Sequence

from rank_bm25 import BM25Okapi

from kernelband.generate.example_bank import Example, load_examples, tokenize


def rank_examples(parent_code: str, strategy: str | None,
                  team_bank: Sequence[Example] = ()) -> Example | None:
    """The best example for `parent_code` among the built-in bank plus `team_bank`."""
    bank = [*load_examples(), *team_bank]
    pool = [i for i, e in enumerate(bank) if strategy is None or e.strategy == strategy]
    if not pool:
        return None
    index = BM25Okapi([tokenize(f"{e.title} {e.before}") for e in bank])
    scores = index.get_scores(tokenize(parent_code))
    best = max(pool, key=lambda i: (scores[i], -i))  # ties keep bank order (built-in first)
    return bank[best]


def example_dict(example: Example) -> dict[str, str]:
    """The example as the generation payload carries it."""
    return {"id": example.id, "title": example.title, "before": example.before,
            "after": example.after}
