"""The one-shot example bank: before/after rewrites tagged by strategy, retrieved with BM25."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml
from rank_bm25 import BM25Okapi

_TOKEN = re.compile(r"[A-Za-z]+|\d+")


@dataclass(frozen=True)
class Example:
    """One before/after pair showing a strategy."""

    id: str
    strategy: str
    title: str
    before: str
    after: str


def tokenize(code: str) -> list[str]:
    """Lower-case word tokens; identifiers split at underscores and digits."""
    return [t.lower() for t in _TOKEN.findall(code)]


@lru_cache(maxsize=1)
def load_examples() -> tuple[Example, ...]:
    """Every example of the packaged bank (kernelband/generate/examples/*.yaml)."""
    folder = resources.files("kernelband.generate").joinpath("examples")
    examples: list[Example] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            examples.extend(Example(**item) for item in yaml.safe_load(entry.read_text("utf-8")))
    return tuple(examples)


def retrieve_example(parent_code: str, strategy: str | None) -> Example | None:
    """The bank example most similar (BM25) to `parent_code` among those of `strategy`."""
    bank = load_examples()
    pool = [i for i, e in enumerate(bank) if strategy is None or e.strategy == strategy]
    if not pool:
        return None
    # score against the whole bank: term weights from two documents would be degenerate
    scores = _index().get_scores(tokenize(parent_code))
    best = max(pool, key=lambda i: (scores[i], -i))  # ties keep bank order (deterministic)
    return bank[best]


@lru_cache(maxsize=1)
def _index() -> BM25Okapi:
    return BM25Okapi([tokenize(f"{e.title} {e.before}") for e in load_examples()])
