"""The policy benchmark (kernelband/policy_bench) as a scenario: its `policy-benchmark` section of
bench/RESULTS.md and its plot under bench/results/, with the SIMULATED example replay table.

    python -m bench.policies [--quick] [--replay FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import RESULTS_DIR, write_section
from kernelband.policy_bench.section import run

EXAMPLE_REPLAY = Path(__file__).resolve().parent / "replay" / "example_simulated.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 seeds, T=20 (about a minute)")
    parser.add_argument("--replay", type=Path, default=EXAMPLE_REPLAY, help="replay table (JSON)")
    args = parser.parse_args(argv)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    plot = RESULTS_DIR / ("policy_curves_quick.png" if args.quick else "policy_curves.png")
    body = run(args.quick, args.replay, plot)
    write_section("policy-benchmark", body)
    print(body)


if __name__ == "__main__":
    main()
