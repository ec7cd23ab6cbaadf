"""The process Nsight Compute profiles: run a candidate once on one case, on the GPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str) -> None:
    """Load `{problem, editable, case_index}` from `path` and run the candidate once."""
    import torch

    from kernelband.problem.model import KernelProblem
    from kernelband.problem.runtime import load_runtime

    payload = json.loads(Path(path).read_text())
    problem = KernelProblem.from_dict(payload["problem"])
    runtime = load_runtime(problem, payload.get("editable"), "cuda")
    case = problem.cases[int(payload["case_index"])]
    runtime.candidate(runtime.inputs(case, 0))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
