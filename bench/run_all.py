"""`make bench`: every CPU benchmark, each writing its section of bench/RESULTS.md, then the Run
section on top (machine, command, each target's verdict).

Sections are delimited by `<!-- NAME:begin/end -->` comments and replaced in place, so a section
this run skips (the simulated policy benchmark and the hour-long CPU corpus by default) is kept.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import (
    api_load,
    corpus,
    fleet_scaling,
    jail_startup,
    policies,
    scheduler_report,
    scheduler_throughput,
)
from bench.common import machine_line, markdown_table, verdict, write_section

Targets = list[tuple[str, str, bool | None, str]]  # (benchmark, target, met, what was measured)


def _report(section: str, module: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Plot (if the module draws one) and write the section of what `module` measured."""
    if hasattr(module, "plot"):
        module.plot(data)
    write_section(section, module.section(data))
    return data


def steps(quick: bool) -> dict[str, Callable[[], Any]]:
    """Each benchmark by name, as `--skip` names it, in the order they run."""
    flag = ["--quick"] if quick else []
    return {
        "policies": lambda: policies.run_simulated(quick, policies.EXAMPLE_REPLAY),
        "measured-replay": lambda: policies.run_measured(quick),
        "api-load": lambda: _report("api-load", api_load, api_load.main(flag)),
        "scheduler-throughput": lambda: _report("scheduler-throughput", scheduler_report,
                                                scheduler_throughput.main(flag)),
        "fleet-scaling": lambda: _report("fleet-scaling", fleet_scaling, fleet_scaling.main(flag)),
        "jail-startup": lambda: _report("jail-startup", jail_startup, jail_startup.measure(quick)),
        "corpus": lambda: corpus.main([]),  # prints a skip line where ../shared/corpus is absent
    }


def targets(done: dict[str, Any]) -> Targets:
    """Every target of the benchmarks that ran."""
    found: Targets = []
    if "api-load" in done:
        met, why = api_load.target_met(done["api-load"])
        found.append(("api load", ">= 500 req/s at p99 <= 50 ms, dashboard mix", met, why))
    if "scheduler-throughput" in done:
        found += [("scheduler", n, m, w)
                  for n, m, w in scheduler_report.targets(done["scheduler-throughput"])]
    if "fleet-scaling" in done:
        found += [("fleet (simulated)", n, m, w)
                  for n, m, w in fleet_scaling.targets(done["fleet-scaling"])]
    return found


def summary(found: Targets, ran: list[str], command: str, wall_s: float) -> str:
    """The top section: machine, load, command and every target's verdict."""
    rows = [(bench, name, "not evaluated" if met is None else verdict(met), why)
            for bench, name, met, why in found]
    return ("## Run\n\n" + machine_line() + "\n\n"
            f"Command: `{command}`; wall time {wall_s:.0f} s; benchmarks run: {', '.join(ran)} "
            "(the other sections are kept from earlier runs). The machine is shared with other "
            "work, so the load average above matters: rates are lower and tails longer under "
            "load. Plots are under bench/results/.\n\n"
            + markdown_table(("benchmark", "target", "verdict", "measured"), rows))


def main(argv: list[str] | None = None) -> None:
    """Run the benchmarks not skipped, write their sections and the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (a few minutes); skips the corpus")
    parser.add_argument("--skip", nargs="*", default=None,
                        help="benchmarks to keep as they are (default: policies, and corpus with "
                             "--quick); `--skip` alone runs everything")
    args = parser.parse_args(argv)
    skip = set(["policies", *(["corpus"] if args.quick else [])] if args.skip is None
               else args.skip)
    start, done = time.perf_counter(), {}
    for name, run in steps(args.quick).items():
        if name not in skip:
            print(f"== {name}", flush=True)
            begin = time.perf_counter()
            done[name] = run()
            print(f"== {name}: {time.perf_counter() - begin:.0f} s", flush=True)
    command = "python -m bench.run_all " + " ".join(argv if argv is not None else sys.argv[1:])
    write_section("bench-run", summary(targets(done), list(done), command.strip(),
                                       time.perf_counter() - start), at_top=True)
    print(f"bench/RESULTS.md updated in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
