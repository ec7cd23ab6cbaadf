"""kill -9 of an embedded `optimize` process mid-job; the next run resumes the same job and
makes the same policy decisions as an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from scheduling_fakes import FAKE_TASKS, decisions, toy_problem
from sqlalchemy import func, select

from kernelband.config import Settings
from kernelband.db.models import Event
from kernelband.db.session import make_engine, make_session_factory, session_scope
from kernelband.scheduling.embedded import JobOptions, run_local_job

OPTIONS = JobOptions(targets=("cpu",), budget=6, parallel=1, seed=11)
CHILD = """
import sys
sys.path.insert(0, {tests!r})
from scheduling_fakes import SLOW_FAKE_TASKS, toy_problem
from kernelband.config import Settings
from kernelband.scheduling.embedded import JobOptions, run_local_job
options = JobOptions(targets=("cpu",), budget=6, parallel=1, seed=11)
run_local_job(Settings(data_dir={data!r}, poll_interval_s=0.01), toy_problem(), options,
              functions=SLOW_FAKE_TASKS)
"""


def finished_pulls(url: str) -> int:
    engine = make_engine(url)
    try:
        with session_scope(make_session_factory(engine)) as session:
            query = select(func.count(Event.id)).where(Event.kind == "pull_finished")
            return int(session.scalar(query) or 0)
    except Exception:
        return 0  # the child has not created the database yet
    finally:
        engine.dispose()


def test_killed_job_resumes_with_identical_decisions(tmp_path: Path) -> None:
    reference = run_local_job(Settings(data_dir=tmp_path / "ref", poll_interval_s=0.01),
                              toy_problem(), OPTIONS, functions=FAKE_TASKS)
    data = tmp_path / "killed"
    settings = Settings(data_dir=data, poll_interval_s=0.01)
    script = CHILD.format(tests=str(Path(__file__).parent), data=str(data))
    child = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ))
    deadline = time.monotonic() + 120
    while finished_pulls(settings.effective_database_url) < 2:
        assert child.poll() is None, "the child exited before it could be killed"
        assert time.monotonic() < deadline, "the child made no progress"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    resumed = run_local_job(settings, toy_problem(), OPTIONS, functions=FAKE_TASKS)
    assert resumed.resumed and resumed.status == "completed" and resumed.job_id == 1
    assert resumed.tracks[0].iterations_done == 6
    assert resumed.tracks[0].best_time_ms == reference.tracks[0].best_time_ms
    engines = [make_engine(o.database_url) for o in (reference, resumed)]
    got = []
    for engine in engines:
        with session_scope(make_session_factory(engine)) as session:
            got.append(decisions(session, 1))
        engine.dispose()
    assert got[0] == got[1] and len(got[0]) == 6
