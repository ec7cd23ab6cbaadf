"""Does a TritonBench-G original give the same result under each of its autotune configs?

The check imports the original twice (reference and candidate); each import autotunes on its
own and may pick a different config. A kernel whose result depends on the config (a masked
load without `other` summed into a reduction, say) then disagrees with itself between the two
imports, although every run of one import is identical. This probe imports the file once, runs
its test with the autotuner pinned to each config in turn, several times each, and prints how
far every output moves from the first config's.

    python -m bench.gpu.probe.autotune_configs_probe FILE [--runs 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any


def _flat(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value.detach().double().cpu()]
    if isinstance(value, dict):
        return [t for key in sorted(value) for t in _flat(value[key])]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _flat(item)]
    return []


def _distance(a: list[Any], b: list[Any]) -> list[float]:
    out = []
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            out.append(float("inf"))
        else:
            out.append(float((x - y).abs().nan_to_num(float("inf")).max()) if x.numel() else 0.0)
    return out


def main(argv: list[str] | None = None) -> None:
    import torch
    import triton

    from kernelband.problem.tritonbench import run_test, runnable_source, test_function_name
    from kernelband.problem.usercode import import_module_file

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    source = args.file.read_text()
    module = import_module_file(runnable_source(source), "original", Path(tempfile.mkdtemp()),
                                "cuda")
    test_name = test_function_name(source)
    tuners = {n: v for n, v in vars(module).items() if isinstance(v, triton.runtime.Autotuner)}
    print(f"== {args.file.stem}: autotuned kernels {sorted(tuners)}")
    for name, tuner in tuners.items():
        configs = list(tuner.configs)
        first: list[Any] | None = None
        for i, config in enumerate(configs):
            tuner.configs = [config]
            tuner.cache.clear()
            for run in range(args.runs):
                outputs = _flat(run_test(module, test_name, 0, "cuda"))  # the fair scope
                torch.cuda.synchronize()
                first = first or outputs
                moved = _distance(first, outputs)
                print(f"   {name} config {i} ({config}) run {run}: max |diff| per output vs "
                      f"config 0 run 0: {[f'{d:.3g}' for d in moved]}", flush=True)
        tuner.configs = configs


if __name__ == "__main__":
    main()
