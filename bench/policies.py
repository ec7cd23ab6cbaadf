"""The policy benchmark (kernelband/policy_bench) as a scenario, into bench/RESULTS.md:

    python -m bench.policies [--quick]             # SIMULATED landscapes and the example replay
    python -m bench.policies --measured [--quick]  # the recorded TritonBench-G corpus

The first writes the `policy-benchmark` section and its plot under bench/results/; the second
the `measured-replay` section, from bench/gpu/replay/tritonbench-g (recorded on an H100) when it
exists, else the CPU recording bench/replay/tritonbench-g-estimated (cost-model estimates).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import RESULTS_DIR, write_section
from kernelband.policy_bench import measured, section

HERE = Path(__file__).resolve().parent
EXAMPLE_REPLAY = HERE / "replay" / "example_simulated.json"
GPU_CORPUS = HERE / "gpu" / "replay" / "tritonbench-g"
ESTIMATED_CORPUS = HERE / "replay" / "tritonbench-g-estimated"


def run_measured(quick: bool, replay: Path | None = None) -> str:
    """The measured-replay section, written to the page; its markdown."""
    body = measured.run(replay or (GPU_CORPUS if GPU_CORPUS.is_dir() else ESTIMATED_CORPUS), quick)
    write_section("measured-replay", body)
    return body


def run_simulated(quick: bool, replay: Path) -> str:
    """The policy-benchmark section and its plot, written; its markdown."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    plot = RESULTS_DIR / ("policy_curves_quick.png" if quick else "policy_curves.png")
    body = section.run(quick, replay, plot)
    write_section("policy-benchmark", body)
    return body


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds (about a minute)")
    parser.add_argument("--measured", action="store_true", help="the recorded corpus instead")
    parser.add_argument("--replay", type=Path, default=None, help="replay table or corpus folder")
    args = parser.parse_args(argv)
    if args.measured:
        print(run_measured(args.quick, args.replay))
    else:
        print(run_simulated(args.quick, args.replay or EXAMPLE_REPLAY))


if __name__ == "__main__":
    main()
