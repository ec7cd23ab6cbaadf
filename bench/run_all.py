"""`make bench`: run every benchmark and regenerate bench/RESULTS.md with tables and plots.

Sections are delimited by `<!-- NAME:begin/end -->` comments and replaced in place, so a section
this run did not produce (the policy benchmark by default) is kept as it was.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import (
    api_load,
    corpus,
    fleet_scaling,
    generation_loop,
    jail_startup,
    policies,
    scheduler_throughput,
)
from bench.common import (
    RESULTS_DIR,
    ROOT,
    fmt,
    machine_line,
    markdown_table,
    verdict,
    write_section,
)

EVALUATOR_JSON = RESULTS_DIR / "evaluator_overhead.json"


def run_evaluator_overhead(rerun: bool) -> dict[str, Any] | None:
    """Run bench/evaluator_overhead.py (full mode) or read its last JSON."""
    if rerun:
        subprocess.run([sys.executable, "-m", "bench.evaluator_overhead"], cwd=ROOT, check=True)
    if not EVALUATOR_JSON.exists():
        return None
    return json.loads(EVALUATOR_JSON.read_text())  # type: ignore[no-any-return]


def evaluator_section(data: dict[str, Any] | None, rerun: bool) -> str:
    """The evaluator-overhead section from its JSON."""
    if data is None:
        return ("## Evaluator overhead\n\nNo result yet: run `python -m bench.evaluator_overhead` "
                "(or `make bench` without --skip-evaluator).")
    when = "re-run by this `make bench`" if rerun else "read from the last run's JSON"
    text = ("## Evaluator overhead\n\n"
            f"Command: `python -m bench.evaluator_overhead` ({when}); {data['label']} on "
            f"{data['device']}, median of {data['repeats']} runs. Overhead = wall time of "
            "`evaluate_candidate` minus the time inside the reference and candidate calls (as the "
            "runners report it); cold = fresh interpreter per evaluation, warm = forked from the "
            "zygote; original = the problem's own kernel (one runner), candidate = its region "
            "passed as a candidate (its own runner, the original's references kept from the "
            "checks before), first candidate = the same with no references kept (a runner of the "
            "original starts too). Zygote start "
            f"(once per process): {data['zygote_start_s']:.2f} s.\n\n" + _overhead_table(data))
    if data.get("before"):
        text += (f"\n\nBefore ({data['before'].get('note', '')}):\n\n" + _overhead_table(data["before"]))
    return text


def _overhead_table(data: dict[str, Any]) -> str:
    columns = ["problem", "cold overhead s", "warm overhead s (original)", "cold / warm"]
    extra = [(key, label) for key, label in (
        ("warm_candidate_overhead_s", "warm overhead s (candidate)"),
        ("warm_first_candidate_overhead_s", "warm overhead s (first candidate)"))
        if all(key in r for r in data["rows"])]
    columns[3:3] = [label for _, label in extra]
    rows = []
    for r in data["rows"]:
        row = [r["problem"], fmt(r["cold_overhead_s"], 3), fmt(r["warm_overhead_s"], 3)]
        row += [fmt(r[key], 3) for key, _ in extra]
        rows.append((*row, fmt(r["cold_overhead_s"] / r["warm_overhead_s"], 1)))
    return markdown_table(tuple(columns), rows)


def summary(targets: list[tuple[str, str, bool | None, str]], command: str,
            wall_s: float) -> str:
    """The top section: machine, load, command and every target's verdict."""
    rows = [(bench, name, "not evaluated" if met is None else verdict(met), why)
            for bench, name, met, why in targets]
    return ("## Run\n\n" + machine_line() + "\n\n"
            f"Command: `{command}`; wall time {wall_s:.0f} s. The machine is shared with other "
            "work, so the load average above matters: rates are lower and tails longer under "
            "load. Plots are under bench/results/. The policy benchmark section is written by "
            "`python -m bench.policies` (run_all keeps it unless given `--policies quick|full`)."
            "\n\n" + markdown_table(("benchmark", "target", "verdict", "measured"), rows))


def timed(label: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one benchmark, printing its wall time."""
    start = time.perf_counter()
    print(f"== {label}", flush=True)
    data = fn()
    print(f"== {label}: {time.perf_counter() - start:.0f} s", flush=True)
    return data


def main(argv: list[str] | None = None) -> None:
    """Run the benchmarks, write their sections and the summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--skip-evaluator", action="store_true",
                        help="read bench/results/evaluator_overhead.json instead of re-running")
    parser.add_argument("--policies", choices=("skip", "quick", "full"), default="skip",
                        help="re-run the policy benchmark (default: keep its section)")
    parser.add_argument("--skip-corpus", action="store_true",
                        help="keep the corpus section (the full corpus run takes about an hour "
                             "on 2 cores; --quick skips it too)")
    parser.add_argument("--skip-measured", action="store_true",
                        help="keep the measured replay section instead of re-running it")
    args = parser.parse_args(argv)
    start, quick = time.perf_counter(), ["--quick"] if args.quick else []
    if args.policies != "skip":
        policies.run_simulated(args.policies == "quick", policies.EXAMPLE_REPLAY)
    if not args.skip_measured:
        timed("measured replay", lambda: {"body": policies.run_measured(args.quick)})
    api = timed("api load", lambda: api_load.main(quick))
    sched = timed("scheduler throughput", lambda: scheduler_throughput.main(quick))
    fleet = timed("fleet scaling", lambda: fleet_scaling.main(quick))
    rerun = not (args.skip_evaluator or args.quick)
    evaluator = timed("evaluator overhead", lambda: run_evaluator_overhead(rerun) or {})
    loop = timed("generation loop (SIMULATED model)", lambda: generation_loop.main(quick))
    write_section("generation-loop", generation_loop.section(loop))
    jailed = timed("jail start-up", lambda: jail_startup.measure(args.quick))
    write_section("jail-startup", jail_startup.section(jailed))
    if not (args.skip_corpus or args.quick):
        # writes its own section; prints a skip message where ../shared/corpus is absent
        timed("corpus acceptance", lambda: {"exit": corpus.main([])})
    command = "python -m bench.run_all " + " ".join(argv if argv is not None else sys.argv[1:])
    render(api, sched, fleet, evaluator, rerun, command.strip(), start)


def render(api: dict[str, Any], sched: dict[str, Any], fleet: dict[str, Any],
           evaluator: dict[str, Any], rerun: bool, command: str, start: float) -> None:
    """Plots, one section per benchmark, and the summary on top."""
    for module, data in ((api_load, api), (scheduler_throughput, sched), (fleet_scaling, fleet)):
        module.plot(data)
    write_section("api-load", api_load.section(api))
    write_section("scheduler-throughput", scheduler_throughput.section(sched))
    write_section("fleet-scaling", fleet_scaling.section(fleet))
    write_section("evaluator-overhead", evaluator_section(evaluator or None, rerun))
    met, why = api_load.target_met(api)
    targets = [("api load", ">= 500 req/s at p99 <= 50 ms, dashboard mix", met, why)]
    targets += [("scheduler", n, m, w) for n, m, w in scheduler_throughput.targets(sched)]
    targets += [("fleet (simulated)", n, m, w) for n, m, w in fleet_scaling.targets(fleet)]
    write_section("bench-run", summary(targets, command, time.perf_counter() - start),
                  at_top=True)
    print(f"bench/RESULTS.md updated in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
