"""Why does the check refuse an unchanged original? Run it under each check context alone.

`python -m bench.gpu.diagnose_original FILE...` (on a GPU; TritonBench-G files): loads each
file as `kernelband check` does, then runs its test in one process several times: plain, in the
fair scope, in a second import of the same file (what the candidate is), and inside each
context the checker adds around a candidate call (launch capture, torch-work and host-work
modes). For every variant it prints, per case, how far the result is from the first fair run
(`0` identical, `inf` shapes/NaNs differ). A context that changes the result is the check's
fault; a result that varies between plain runs is the file's own nondeterminism.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DEVICE = os.environ.get("KERNELBAND_DIAG_DEVICE", "cuda")


def _variants(runtime: Any) -> list[tuple[str, Callable[[], Any]]]:
    from kernelband.evaluate.host_work import HostWork
    from kernelband.evaluate.torch_work import TorchWork
    from kernelband.problem.devices import device_scope
    from kernelband.problem.tritonbench import run_test
    from kernelband.profile.launches import capture_launches

    original, candidate = runtime.original_module, runtime.candidate_module
    name, device = runtime.test_name, runtime.device

    def fair(module: Any) -> Callable[[], Any]:
        return lambda: run_test(module, name, 0, device)

    def plain() -> Any:
        import torch

        torch.manual_seed(0)
        with device_scope(device):
            return getattr(original, name)()

    def inside(*contexts: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with contextlib.ExitStack() as stack:
                for make in contexts:
                    stack.enter_context(make())
                return run_test(candidate, name, 0, device)
        return run

    return [
        ("fair again (same module)", fair(original)),
        ("fair, second import", fair(candidate)),
        ("plain (seeded, no fair scope)", plain),
        ("plain again", plain),
        ("capture_launches", inside(capture_launches)),
        ("torch_work(region)", inside(lambda: TorchWork(runtime.candidate_region))),
        ("host_work", inside(lambda: HostWork([]))),
        ("all three", inside(capture_launches, lambda: TorchWork(runtime.candidate_region),
                             lambda: HostWork([]))),
        ("fair, original again", fair(original)),
    ]


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kb-diag-") as folder:
        yield Path(folder)


def diagnose(path: Path) -> None:
    """Print the spread of every variant against the first fair run, per case."""
    from kernelband.problem.runtime import load_runtime
    from kernelband.problem.selfcheck import spread
    from kernelband.problem.tritonbench import load_tritonbench, run_test

    print(f"== {path.stem}", flush=True)
    with _workdir() as work:
        problem = load_tritonbench(path.read_text(), path.stem, work, DEVICE)
        print(f"   load: allow_nondeterminism={problem.allow_nondeterminism} "
              f"self_spread={problem.self_spread} tolerances={problem.tolerances}")
        runtime: Any = load_runtime(problem, None, DEVICE, workdir=work)
        base = run_test(runtime.original_module, runtime.test_name, 0, DEVICE)
        for label, run in _variants(runtime):
            try:
                got = run()
                found = {case: spread(base[case], got.get(case)) for case in base}
                shown = {c: f"{v:.3g}" for c, v in found.items() if v}
                print(f"   {label:32s} {shown or 'identical'}", flush=True)
            except Exception as exc:  # noqa: BLE001 - a diagnostic reports every failure
                print(f"   {label:32s} raised {type(exc).__name__}: {str(exc)[:300]}")
                traceback.print_exc(limit=3)


def main(argv: list[str]) -> int:
    for name in argv:
        try:
            diagnose(Path(name))
        except Exception as exc:  # noqa: BLE001
            print(f"== {name}: failed: {type(exc).__name__}: {str(exc)[:400]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
