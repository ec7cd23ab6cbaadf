"""The process Nsight Compute profiles: run a candidate once on one case, on the GPU.

It runs candidate code, so the sandbox's audit policy is installed before anything is loaded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from kernelband.problem.model import KernelProblem
from kernelband.sandbox import guard


def run_case(payload: dict[str, Any]) -> None:
    """Run `{problem, editable, case_index}`'s candidate once on the GPU, under the audit guard."""
    workdir = os.getcwd()
    guard.install((workdir, os.environ.get("TRITON_CACHE_DIR", workdir)))
    # after the guard is up: nothing of the candidate's run loads unguarded (module doc)
    import torch

    # the runtime imports the problem and the candidate: they load under the guard too
    from kernelband.problem.runtime import load_runtime

    problem = KernelProblem.from_dict(payload["problem"])
    runtime = load_runtime(problem, payload.get("editable"), "cuda")
    case = problem.cases[int(payload["case_index"])]
    runtime.candidate(runtime.inputs(case, 0))
    torch.cuda.synchronize()


def main(path: str) -> None:
    """Load the payload from `path` (read before the guard goes up) and run it."""
    run_case(json.loads(Path(path).read_text()))


if __name__ == "__main__":
    main(sys.argv[1])
