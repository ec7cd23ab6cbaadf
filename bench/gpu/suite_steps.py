"""Where a suite's GPU time went, read back from its database: every profile and verify step
with its parts, and the suite's report rebuilt from what the database holds.

    python -m bench.gpu.suite_steps RUN/suite.db [...] --out steps.md
    python -m bench.gpu.suite_steps RUN/suite.db --report suite-twice-h200-A.json

A suite's database is its record: the report a run printed can be rebuilt from it (`--report`
writes it in the shape `bench.gpu.suite_twice` compares), and the steps table shows what the
report's medians hide, for example which steps waited for the GPU's exclusive turn and how long.
The parts are the `timings` the GPU worker put in each attempt's result (the judge's clock on
the worker's host): `check` runs beside `measure` (kernelband/scheduling/candidate_tasks.py),
and `measure_*` are the paired measurement's parts (docs/measurement.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bench.gpu.corpus_gpu import stored_report
from kernelband.db.models import Attempt, Job, Problem, Suite
from kernelband.scheduling.stages import result_timings
from kernelband.suite.store import suite_report, suite_steps, suite_throughput
from kernelband.suite.throughput import DEVICE_KINDS, HELD_PART, timed_share

# the columns of the steps table, in the order a step spends them; absent parts show as "-"
COLUMNS = ("check", "check_wait", "measure_static", "measure_load_original", "measure_wait_shared",
           "measure_load_candidate", "measure_prepare", "measure_wait_gpu", "measure_preempted", "measure_calibrate",
           "measure_inputs", "measure_timed_rounds", "measure_verify", "measure_tune", "measure_held_alone", "measure")


def step_rows(session: Session, suite_id: str) -> list[dict[str, Any]]:
    """One row per finished profile or verify attempt of the suite, in start order."""
    query = (select(Attempt.job_id, Attempt.kind, Attempt.state, Attempt.payload, Attempt.started_at,
                    Attempt.finished_at, Attempt.result, Problem.name)
             .join(Job, Job.id == Attempt.job_id).join(Problem, Problem.id == Job.problem_id)
             .where(Job.suite_id == suite_id, Attempt.kind.in_(DEVICE_KINDS),
                    Attempt.started_at.is_not(None), Attempt.finished_at.is_not(None))
             .order_by(Attempt.started_at, Attempt.id))
    rows = []
    for job_id, kind, state, payload, started, finished, result, problem in session.execute(query):
        rows.append({"job": job_id, "problem": problem, "kind": kind, "state": state,
                     "original": bool((payload or {}).get("original")), "started": started,
                     "work_s": (finished - started).total_seconds(), "parts": result_timings(result)})
    return rows


def render(path: Path, session: Session, suite_id: str) -> str:
    """Markdown for one suite database: its cost, the steps table and each part's median."""
    report = suite_report(session, suite_id)
    rows = step_rows(session, suite_id)
    lines = [f"## {path.name}: {report.jobs_finished} of {len(report.job_ids)} jobs finished", ""]
    steps = suite_steps(session, suite_id)
    parts = [s.parts_total_s for s in steps if s.kind in DEVICE_KINDS]
    for cost in suite_throughput(session, suite_id):
        alone = timed_share(parts, cost.device_s)
        if cost.estimated:  # no GPU: nothing was held
            lines.append(f"- {cost.describe()}")
        elif any(HELD_PART in p for p in parts):
            lines.append(f"- {cost.describe()}; the GPU held alone {alone:.1f}% of it (as held)")
        else:
            rounds = 100.0 * sum(p.get("measure_timed_rounds", 0.0) for p in parts) / cost.device_s
            lines.append(f"- {cost.describe()}; the GPU held alone at least {rounds:.1f}% of it (the timed "
                         f"rounds) and at most {alone:.1f}% (results without the held part: calibrate, "
                         "prepare, timed rounds and verify, whose prepare includes the first inputs' shared turn)")
    lines += ["", "| job | problem | kind | original | started | work | " + " | ".join(COLUMNS) + " |",
              "| --- " * (6 + len(COLUMNS)) + "|"]
    for r in rows:
        cells = " | ".join(f"{r['parts'][c]:.2f}" if c in r["parts"] else "-" for c in COLUMNS)
        lines.append(f"| {r['job']} | {r['problem']} | {r['kind']} | {'yes' if r['original'] else ''} | "
                     f"{r['started']:%H:%M:%S} | {r['work_s']:.2f} | {cells} |")
    for kind in DEVICE_KINDS:
        of_kind = [r for r in rows if r["kind"] == kind]
        if not of_kind:
            continue
        medians = {c: statistics.median(v) for c in COLUMNS if (v := [r["parts"][c] for r in of_kind
                                                                       if c in r["parts"]])}
        totals = {c: sum(r["parts"].get(c, 0.0) for r in of_kind) for c in medians}
        lines.append(f"| median of {len(of_kind)} | | {kind} | | | "
                     f"{statistics.median(r['work_s'] for r in of_kind):.2f} | "
                     + " | ".join(f"{medians[c]:.2f}" if c in medians else "-" for c in COLUMNS) + " |")
        lines.append(f"| sum of {len(of_kind)} | | {kind} | | | {sum(r['work_s'] for r in of_kind):.1f} | "
                     + " | ".join(f"{totals[c]:.1f}" if c in totals else "-" for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def rebuilt_report(database: Path) -> dict[str, Any]:
    """The suite's report with its steps and cost, in the shape `suite_twice` keeps a run."""
    report = stored_report(database) or {}
    return {"problems": sorted({p["problem"] for p in report.get("problems", [])}),
            "budget": (report.get("settings") or {}).get("budget"),
            "status": "rebuilt from the suite database", "report": report}


def steps_markdown(database: Path) -> str:
    """The steps tables of one suite database (what `main` prints for it)."""
    session, suite_id = _open(database)
    with session:
        return render(database, session, suite_id)


def _open(path: Path) -> tuple[Session, str]:
    if not path.is_file():
        raise SystemExit(f"{path}: no such suite database (a run's suite.db)")
    session = Session(create_engine(f"sqlite:///{path}"))
    # the newest suite, as corpus_gpu.stored_report reads it
    suite_id = session.scalars(select(Suite.id).order_by(Suite.created_at.desc())).first()
    if suite_id is None:
        raise SystemExit(f"{path}: holds no suite")
    return session, suite_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu.suite_steps", description=__doc__.split("\n\n")[0])
    parser.add_argument("databases", nargs="+", type=Path, help="suite databases (SQLite files)")
    parser.add_argument("--out", type=Path, help="write the steps tables here (default: print them)")
    parser.add_argument("--report", type=Path, help="write the first database's rebuilt report here")
    args = parser.parse_args(argv)
    text = "\n".join(steps_markdown(path) for path in args.databases)
    if args.report:
        args.report.write_text(json.dumps(rebuilt_report(args.databases[0]), indent=1, default=str))
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
