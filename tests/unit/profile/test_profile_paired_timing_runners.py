"""The runners of a paired measurement on the CPU interpreter: the idle one paused, the
measuring one pinned to its cores, the original's kept warm between candidates, a runner that
dies or hangs stopped with its reason, one closed soon closed before the process waits."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.problem.model import KernelProblem
from kernelband.profile.paired_runners import ORIGINALS, PairedConfig
from tests.unit.profile.paired_examples import CONFIG, SLOWER, measure, paired_problem, with_prelude


@pytest.fixture(scope="module")
def problem() -> Iterator[KernelProblem]:
    yield from paired_problem()


def test_the_idle_runner_is_stopped_while_the_other_is_timed(problem: KernelProblem) -> None:
    from kernelband.profile.paired_runners import start_runner
    from kernelband.sandbox.watch import session_members

    runner = start_runner(problem, with_prelude(problem, SLOWER), "cpu", CONFIG, None)
    try:
        runner.session.pause()
        states = [_state(pid) for pid, _ in session_members(runner.session.pid)]
        assert states and set(states) == {"T"}, states
        before = runner.session.cpu_seconds()
        time.sleep(0.5)  # its spinning threads are stopped too: no CPU time is charged
        assert runner.session.cpu_seconds() == before
        runner.session.resume()
        assert "T" not in {_state(pid) for pid, _ in session_members(runner.session.pid)}
    finally:
        result = runner.close()
    assert result.ok, result.message


FORKS_LATER = '''
import os as _os
import threading as _threading
import time as _time

def _fork_a_spinner():
    while not _os.path.exists("fork-now"):  # written after the judge's first pause and its scan
        _time.sleep(0.02)
    if _os.fork() == 0:
        while True:
            pass

_threading.Thread(target=_fork_a_spinner, daemon=True).start()
'''


def test_a_pause_scans_proc_once_and_still_stops_a_process_started_since(
        problem: KernelProblem, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelband.profile.paired_runners import start_runner
    from kernelband.sandbox import SandboxLimits
    from kernelband.sandbox import session as session_module
    from kernelband.sandbox.watch import session_members

    scans: list[int] = []

    def counted(sid: int) -> list[tuple[int, int]]:
        scans.append(sid)
        return session_members(sid)

    monkeypatch.setattr(session_module, "session_members", counted)
    monkeypatch.setattr(session_module, "MEMBERS_RESCAN_S", 3600.0)
    # the audit hook refuses a candidate's fork: turned off here to have a process the scan missed
    unaudited = replace(SandboxLimits.from_settings(interpret=True), audit=False)
    runner = start_runner(problem, with_prelude(problem, FORKS_LATER), "cpu", CONFIG, unaudited)
    try:
        runner.session.pause()
        scanned = {pid for pid, _ in session_members(runner.session.pid)}  # before the spinner's fork
        (Path(runner.session.workdir) / "fork-now").touch()
        runner.session.resume()
        deadline = time.monotonic() + 20
        while len(session_members(runner.session.pid)) <= len(scanned) and time.monotonic() < deadline:
            time.sleep(0.05)
        spinner = {pid for pid, _ in session_members(runner.session.pid)} - scanned
        assert spinner, "the prelude's process was not forked"
        for _ in range(20):
            runner.session.resume()
            runner.session.pause()
        assert len(scans) == 1, scans  # one scan of /proc for 21 pauses
        # the spinner was never in a scan, yet the process group's SIGSTOP stops it (delivered
        # asynchronously: the pause did not wait for a process it did not know)
        deadline = time.monotonic() + 5
        while {_state(pid) for pid in spinner} != {"T"} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert {_state(pid) for pid in spinner} == {"T"}
    finally:
        result = runner.close()
    assert result.ok, result.message


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2 :].split()[0]


def test_a_runner_that_dies_mid_session_is_a_result_with_its_reason(problem: KernelProblem) -> None:
    dies = "import os as _os\n_calls = []\n\n" + problem.editable.replace(
        "    out = torch.empty_like(x)\n",
        "    _calls.append(1)\n    if len(_calls) > 2:\n        _os._exit(3)\n    out = torch.empty_like(x)\n")
    with pytest.raises(TimingRejected) as info:
        measure(problem, dies, PairedConfig(rounds=3, batch_ms=10.0, seed=1, clock="cpu"))
    assert info.value.reason == "runner_exited"


def test_the_originals_runner_stays_warm_between_candidates(problem: KernelProblem) -> None:
    from kernelband.profile.paired_runners import OriginalRunnerError, runner_error

    quick = PairedConfig(rounds=3, batch_ms=10.0, seed=2, clock="cpu")
    key = ORIGINALS.key(problem, "cpu", quick)
    measure(problem, None, quick)
    first = ORIGINALS.idle[key].session.pid
    measure(problem, None, quick)
    assert ORIGINALS.idle[key].session.pid == first and ORIGINALS.idle[key].session.paused
    # a failing original is a failure to measure, never the candidate's rejection
    assert isinstance(runner_error("original", "runner_exited", "x"), OriginalRunnerError)
    assert runner_error("original", "runner_exited", "x").reason == "original_runner_exited"  # type: ignore[attr-defined]
    assert isinstance(runner_error("candidate", "runner_exited", "x"), TimingRejected)


def test_a_measuring_runner_batches_on_the_measuring_cores_and_loads_elsewhere(problem: KernelProblem) -> None:
    from kernelband.profile.paired_runners import start_runner
    from kernelband.sandbox.watch import session_members

    pinned = start_runner(problem, None, "cpu", replace(CONFIG, cores=(0,)), None)
    try:
        # the runner: the process serving the FIFOs (a jail may keep idle parents above it)
        runner = [pid for pid, _ in session_members(pinned.session.pid) if _serves_fifos(pid)]

        def affinities() -> list[set[int]]:
            return [os.sched_getaffinity(int(tid)) for pid in runner for tid in os.listdir(f"/proc/{pid}/task")]
        assert pinned.unpinned == "" and affinities()
        # loading and compiling stay off the measuring core (on a host with another core)
        assert len(os.sched_getaffinity(0)) == 1 or all(cores != {0} for cores in affinities())
        for command in ({"cmd": "prepare", "seed": 1}, {"cmd": "run_batch", "k": 1}):
            pinned.session.request({**command, "case": pinned.cases[0]}, 60.0)
        assert affinities() and all(cores == {0} for cores in affinities())
    finally:
        pinned.close()
    with closing(start_runner(problem, None, "cpu", replace(CONFIG, cores=(4095,)), None)) as missing:
        assert "not pinned to [4095]" in missing.unpinned  # said, not silently ignored


def _serves_fifos(pid: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd).endswith("commands.fifo") for fd in fds.iterdir())
    except OSError:
        return False


def test_a_runner_that_hangs_is_stopped_with_its_reason(problem: KernelProblem) -> None:
    hangs = "import time as _time\n_calls = []\n\n" + problem.editable.replace(
        "    out = torch.empty_like(x)\n",
        "    _calls.append(1)\n    if len(_calls) > 2:\n        _time.sleep(600)\n    out = torch.empty_like(x)\n")
    quick = PairedConfig(rounds=3, batch_ms=10.0, seed=1, clock="cpu", command_timeout_s=5.0)
    started = time.monotonic()
    with pytest.raises(TimingRejected) as info:
        measure(problem, hangs, quick)
    assert info.value.reason == "runner_timeout" and time.monotonic() - started < 60


def test_a_runner_closed_soon_is_closed_by_the_time_the_process_waits_for_closes(
        problem: KernelProblem) -> None:
    from kernelband.profile.paired_runners import close_soon, start_runner, wait_for_closes

    runner = start_runner(problem, None, "cpu", CONFIG, None)
    close_soon(runner)
    wait_for_closes()
    assert runner.closed


def test_both_runners_prepare_their_inputs_at_once(problem: KernelProblem) -> None:
    from kernelband.profile.paired_commands import RunnerPair
    from kernelband.profile.paired_runners import start_runner

    # every call sleeps half a second: one prepare after the other would take a second
    slow = "import time as _time\n\n" + problem.editable.replace(
        "    out = torch.empty_like(x)\n", "    _time.sleep(0.5)\n    out = torch.empty_like(x)\n")
    runners = [start_runner(problem, slow, "cpu", CONFIG, None) for _ in range(2)]
    try:
        pair = RunnerPair(runners[0], runners[1], CONFIG)
        started = time.perf_counter()
        pair.prepare(runners[0].cases[:1], seed=3)
        assert time.perf_counter() - started < 0.9
    finally:
        for runner in runners:
            runner.close()


def test_a_runner_failing_mid_prepare_leaves_the_other_runner_in_step(problem: KernelProblem) -> None:
    from kernelband.profile.paired_commands import RunnerPair
    from kernelband.profile.paired_runners import start_runner

    original, candidate = (start_runner(problem, problem.editable, "cpu", CONFIG, None) for _ in range(2))
    try:
        candidate.close()  # the candidate's commands now fail after the original's were sent
        with pytest.raises(TimingRejected):
            RunnerPair(original, candidate, CONFIG).prepare(original.cases[:2], seed=3)
        reply = original.session.request({"cmd": "ping"}, 30.0).value
        assert reply.get("ok") and "spent_ms" not in reply, reply  # its own reply, not a prepare's
    finally:
        original.close()
