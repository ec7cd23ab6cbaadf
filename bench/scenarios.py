"""The named benchmark scenarios: what each runs, where it runs, and which page its figures go to.

    python -m bench.scenarios                       # the list
    python -m bench.scenarios NAME [--out DIR] [ARGS...]

`make bench` runs `all` (every CPU benchmark, bench/RESULTS.md); `make bench SCENARIO=name` one
CPU scenario; `make bench-gpu SCENARIO=name [OUT=DIR] [ARGS=...]` one GPU scenario on a GPU node.
ARGS replace a scenario's default options; `{out}`, `{target}` and `{gpus}` in a command are the
output folder (default bench/gpu/runs/<name>-<target>-<date>), the node's KernelBand target
(h100, h200, ...) and its GPU count.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "gpu" / "runs"

# Device names that map onto a KernelBand target (the first match wins).
_TARGET_BY_NAME = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"), ("4090", "rtx4090"))


@dataclass(frozen=True)
class Scenario:
    """One benchmark: `command` is fixed, `defaults` are its options unless ARGS replace them."""

    name: str
    device: str  # "cpu", "gpu", or "any"
    command: tuple[str, ...]
    defaults: tuple[str, ...]
    purpose: str
    page: str

    def argv(self, extra: list[str], out: Path, target: str, gpus: int) -> list[str]:
        """The command line to run, placeholders filled in."""
        words = [*self.command, *(extra or self.defaults)]
        filled = [w.format(out=out, target=target, gpus=gpus) for w in words]
        return filled if filled[0] == "sh" else [sys.executable, "-m", *filled]


def _py(name: str, device: str, module: str, purpose: str, page: str,
        defaults: tuple[str, ...] = (), fixed: tuple[str, ...] = ()) -> Scenario:
    return Scenario(name, device, (module, *fixed), defaults, purpose, page)


CPU_PAGE, TIMING, CORPUS_PAGE, FLEET = ("bench/RESULTS.md", "bench/gpu/RESULTS.md",
                                        "bench/gpu/RESULTS-corpus.md", "bench/gpu/RESULTS-fleet.md")
SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _py("all", "cpu", "bench.run_all", "every CPU benchmark below, its sections of the page",
        CPU_PAGE),
    _py("api-load", "cpu", "bench.api_load", "requests/s and latency of the REST API on Postgres",
        CPU_PAGE),
    _py("scheduler-throughput", "cpu", "bench.scheduler_throughput",
        "scheduler passes with simulated task results: pulls/s, select+dispatch p99", CPU_PAGE),
    _py("fleet-simulated", "cpu", "bench.fleet_scaling",
        "the real scheduler feeding N simulated GPU workers: GPU busy share", CPU_PAGE),
    _py("policies", "cpu", "bench.policies", "every policy on simulated reward landscapes",
        CPU_PAGE),
    _py("policies-measured", "cpu", "bench.policies", "every policy on the measured replay "
        "corpus (bench/gpu/replay/tritonbench-g)", CPU_PAGE, fixed=("--measured",)),
    _py("corpus-cpu", "cpu", "bench.corpus", "every corpus file through `kernelband check` in "
        "the Triton interpreter (about an hour on 2 cores)", CPU_PAGE),
    _py("jail-startup", "any", "bench.jail_startup",
        "start-up cost of the jail per run, jailed and not, cold and warm", CPU_PAGE),
    _py("corpus", "gpu", "bench.corpus", "the corpus checked, and a short suite, on the "
        "node's GPU", CORPUS_PAGE,
        fixed=("--target", "{target}", "--out", "{out}")),
    _py("judge-forgeries", "gpu", "bench.gpu.judge_forgeries",
        "the judge against forged verdicts on CUDA", TIMING, fixed=("--out", "{out}")),
    _py("paired-aa", "gpu", "bench.gpu.paired_aa", "A/A: corpus originals measured against "
        "themselves through the paired measurement", TIMING,
        fixed=("--out", "{out}"), defaults=("--graphs",)),
    _py("runner-anatomy", "gpu", "bench.gpu.runner_anatomy", "where a timing runner's start and a "
        "round's fresh inputs spend their time", TIMING, fixed=("--out", "{out}")),
    _py("settle-replay", "cpu", "bench.gpu.settle_replay", "the paired measurement's stopping rule "
        "replayed on the recorded A/A rounds under bench/gpu/runs (nothing measured)", TIMING),
    _py("suite-twice", "gpu", "bench.gpu.suite_twice", "one suite run twice: do speedups repeat "
        "(ARGS='--run B' for the second, '--compare' for the table)", TIMING,
        fixed=("--target", "{target}", "--out", "{out}"), defaults=("--run", "A")),
    Scenario("fleet-scaling", "gpu", ("sh", "bench/gpu/fleet.sh", "{out}"),
             ("--target", "{target}", "--gpus-list", "{gpus},1"), "the whole deployment on one "
             "node, a suite through the API at several GPU counts", FLEET),
)}


def gpu_facts() -> tuple[str, int]:
    """(KernelBand target, GPU count) read from nvidia-smi; ("", 0) without a GPU."""
    if shutil.which("nvidia-smi") is None:
        return "", 0
    done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True, check=False)
    names = [line for line in done.stdout.splitlines() if line.strip()]
    if not names:
        return "", 0
    return target_for_device(names[0]), len(names)


def target_for_device(name: str) -> str:
    """The KernelBand target of a CUDA device name (`NVIDIA H100 80GB HBM3` -> `h100`)."""
    for needle, target in _TARGET_BY_NAME:
        if needle in name.upper():
            return target
    raise SystemExit(f"no KernelBand target for device {name!r}: pass the target in ARGS")


def run_folder(name: str, target: str) -> Path:
    """Where a GPU scenario's records go: bench/gpu/runs/<name>-<target>-<date>."""
    day = datetime.datetime.now(datetime.UTC).date().isoformat()
    return RUNS / f"{name}-{target}-{day}"


def listing() -> str:
    """One line per scenario: name, device, purpose, page."""
    return "\n".join(f"{s.name:24} {s.device:4} {s.purpose} -> {s.page}"
                     for s in SCENARIOS.values())


def run(name: str, extra: list[str], out: Path | None, gpu_only: bool) -> int:
    """Run one scenario; refuses a GPU scenario on a machine without a GPU."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise SystemExit(f"unknown scenario {name!r}; the scenarios are:\n{listing()}")
    if gpu_only and scenario.device == "cpu":
        raise SystemExit(f"{name} is a CPU scenario: run it with `make bench SCENARIO={name}`")
    target, gpus = gpu_facts()
    if scenario.device == "gpu" and not gpus:
        raise SystemExit(f"{name} needs a GPU and nvidia-smi finds none here: run it on a GPU "
                         "node (`make bench-gpu SCENARIO=" + name + "`)")
    out = out or run_folder(name, target or "cpu")
    argv = scenario.argv(extra, out, target or "cpu", gpus)
    print("+ " + " ".join(argv), flush=True)
    return subprocess.run(argv, cwd=ROOT, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    """List the scenarios, or run one."""
    parser = argparse.ArgumentParser(prog="python -m bench.scenarios", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", nargs="?", help="scenario (none: list them)")
    parser.add_argument("--out", type=Path, default=None, help="output folder of a GPU scenario")
    parser.add_argument("--gpu", action="store_true", help="refuse CPU scenarios (make bench-gpu)")
    args, extra = parser.parse_known_args(argv)
    if args.name is None:
        print(listing())
        return 0
    return run(args.name, extra, args.out, args.gpu)


if __name__ == "__main__":
    sys.exit(main())
