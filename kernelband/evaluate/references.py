"""Reference outputs kept by the judge: keyed by (problem, device, case, seed), bounded in bytes.

A reference output comes from a runner of the original (never from a candidate's process), so
it is the same for every candidate of a problem checked on the same inputs. The judge therefore
draws one base seed per problem and device per process (`base_seed`) and keeps the outputs of
those seeds here: a later candidate's check then starts only its own runner. A warm runner per
problem (GPU throughput work) can keep the same keys.

The seeds stay unknown to a candidate before its runner starts (they are drawn at random in the
judge's process, never derived from the problem), and each base seed is used for at most
`SEED_USES` checks before a new one is drawn.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kernelband.evaluate.compare import tensors
from kernelband.problem.model import KernelProblem

MAX_BYTES = 512 * 1024 * 1024  # reference outputs kept per judge process
SEED_USES = 64  # checks that share one base seed before a fresh one is drawn


def problem_key(problem: KernelProblem, device: str) -> str:
    """What a reference output depends on: the whole problem (source, cases, tolerances) and
    the device kind (`cuda:1` and `cuda` run the same code)."""
    text = json.dumps(problem.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(f"{device.split(':')[0]}\n{text}".encode()).hexdigest()


def _nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(value)) + 64


@dataclass
class _Seed:
    value: int
    uses: int = 0


class ReferenceStore:
    """An LRU of reference outputs and of each case's measured self-spread."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._outputs: OrderedDict[tuple[str, str, int], tuple[Any, int]] = OrderedDict()
        self._spreads: dict[tuple[str, str], float] = {}
        self._seeds: OrderedDict[str, _Seed] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # embedded mode checks candidates on several threads

    def base_seed(self, key: str) -> int:
        """The base seed this process uses for the problem `key` (a fresh one every SEED_USES)."""
        with self._lock:
            seed = self._seeds.get(key)
            if seed is None or seed.uses >= SEED_USES:
                seed = _Seed(random.SystemRandom().randrange(1, 1 << 30))
                self._drop_problem(key)
            seed.uses += 1
            self._seeds[key] = seed
            self._seeds.move_to_end(key)
            while len(self._seeds) > 256:
                self._drop_problem(next(iter(self._seeds)))
                self._seeds.popitem(last=False)
            return seed.value

    def _drop_problem(self, key: str) -> None:
        for output in [k for k in self._outputs if k[0] == key]:
            self._bytes -= self._outputs.pop(output)[1]
        for spread in [k for k in self._spreads if k[0] == key]:
            del self._spreads[spread]

    def output(self, key: str, case: str, seed: int) -> Any:
        """A kept reference output, or None."""
        with self._lock:
            found = self._outputs.get((key, case, seed))
            if found is None:
                return None
            self._outputs.move_to_end((key, case, seed))
            return found[0]

    def keep(self, key: str, case: str, seed: int, value: Any) -> None:
        size = _nbytes(value)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._outputs.pop((key, case, seed), None)
            self._bytes += size - (old[1] if old else 0)
            self._outputs[(key, case, seed)] = (value, size)
            while self._bytes > self.max_bytes and self._outputs:
                self._bytes -= self._outputs.popitem(last=False)[1][1]

    def spread(self, key: str, case: str) -> float | None:
        """How far the reference moved when run again on identical inputs, if measured."""
        with self._lock:
            return self._spreads.get((key, case))

    def keep_spread(self, key: str, case: str, value: float) -> None:
        with self._lock:
            self._spreads[(key, case)] = value

    def clear(self) -> None:
        with self._lock:
            self._outputs.clear()
            self._spreads.clear()
            self._seeds.clear()
            self._bytes = 0


STORE = ReferenceStore()
