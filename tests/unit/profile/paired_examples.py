"""The problem the paired-timing tests measure on the CPU interpreter, and how they measure it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernelband.problem import load_problem
from kernelband.problem.model import KernelProblem
from kernelband.profile.measurement import Measurement
from kernelband.profile.paired_result import measure_speedup
from kernelband.profile.paired_runners import ORIGINALS, PairedConfig

FIXTURE = Path(__file__).parent / "fixtures" / "paired_problem.py"
CONFIG = PairedConfig(rounds=12, batch_ms=80.0, seed=7, clock="cpu")
LAUNCH = "    double_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)\n"


class TurnRecorder:
    """Stands in for `gpu_turn`: `now` is the turn held at the moment ("shared", "exclusive" or
    "none"), for spies that note which turn a runner command ran in."""

    def __init__(self) -> None:
        self.now = "none"

    @contextmanager
    def __call__(self, device: str, *, exclusive: bool, own: tuple[int, ...] = (),
                 settle_later: bool = False) -> Iterator[dict[str, float]]:
        self.now = "exclusive" if exclusive else "shared"
        try:
            yield {"waited_s": 0.0}
        finally:
            self.now = "none"


def paired_problem() -> Iterator[KernelProblem]:
    """A module-scoped fixture's body: the problem, then its warm originals closed."""
    yield load_problem(FIXTURE.read_text(), "native", "paired_double")
    ORIGINALS.close_all()


def measure(problem: KernelProblem, editable: str | None, config: PairedConfig = CONFIG) -> Measurement:
    return measure_speedup(problem, editable, "cpu", target="cpu", device_name="host", config=config)


def with_prelude(problem: KernelProblem, prelude: str) -> str:
    """The original region with `prelude` run when the candidate module is imported."""
    return prelude + "\n" + problem.editable


SLOWER = '''
import threading as _threading
import time as _time

def _spin():
    while True:  # would take the original's cores whenever this process may run
        _time.perf_counter()

for _ in range(2):
    _threading.Thread(target=_spin, daemon=True).start()
'''
