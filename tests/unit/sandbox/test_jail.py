"""The jail, tried as an attacker would: a problem module and a candidate look for the service's
secrets and data from inside their runner, and find nothing.

A "service" process (the parent of every runner, as the API or a worker is) holds a canary LLM
key in its environment and its data dir with an SQLite file; another run's work dir holds a
canary file. The attack (module-level code) walks /proc for ancestors' environments and working
dirs, reads the data dir and database, the other run's dir, /etc/shadow, /root and /home, and
opens a socket to Postgres' port. Each attempt must fail inside the jail, and the canaries must
appear nowhere in what comes back (values, messages, stderr, the service's own output).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelband.bundled import example
from kernelband.sandbox import SandboxLimits, SandboxResult, jail, run_sandboxed, shutdown_pool
from kernelband.sandbox.secrets import REDACTED, scrub_secrets

ATTACK = r'''
import json, os, socket, sqlite3

def _try(fn):
    try:
        return {"ok": True, "got": repr(fn())[:200]}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}

def _ancestors():
    chain, pid = [], os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        chain.append(pid)
    return chain

def _others():
    return [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]

def _environ_with_key():
    found = []
    for pid in _others():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if b"KERNELBAND_LLM_API_KEY=" in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found

def _cwd_names():
    names = set()
    for pid in _others():
        for link in ("cwd", "root"):
            try:
                names.update(os.listdir(f"/proc/{pid}/{link}"))
            except OSError:
                pass
    return sorted(names)[:40]

REPORT = {
    "uid": os.getuid(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "ancestors": _ancestors(),
    "environ_with_key": _environ_with_key(),
    "ancestor_cwd_names": _cwd_names(),
    "data_dir": _try(lambda: os.listdir(PATHS["data_dir"])),
    "database": _try(lambda: open(PATHS["database"], "rb").read(64)),
    "sqlite": _try(lambda: sqlite3.connect(f"file:{PATHS['database']}?mode=ro", uri=True)
                   .execute("select secret from t").fetchall()),
    "other_run": _try(lambda: open(PATHS["other_run"]).read()),
    "runs_listing": _try(lambda: os.listdir(os.path.dirname(os.getcwd()))),
    "shadow": _try(lambda: open("/etc/shadow").read()),
    "root": _try(lambda: sorted(os.listdir("/root"))),
    "home": _try(lambda: os.listdir("/home")),
    "postgres": _try(lambda: socket.create_connection(("127.0.0.1", 5432), timeout=2).close()),
}
if PATHS.get("raise"):
    raise RuntimeError("REPORT " + json.dumps(REPORT, separators=(",", ":")))
'''

SERVICE = r'''
import json, sys
from kernelband.problem.model import ProblemLoadError
from kernelband.sandbox import SandboxLimits, jail, load_problem_sandboxed, run_sandboxed, shutdown_pool

candidate, problem = (open(p).read() for p in sys.argv[1:3])
out = {"level": jail.isolation_level()}
for warm in (True, False):
    for audit in (True, False):  # audit off: the operating system alone must stop each attempt
        limits = SandboxLimits(warm=warm, audit=audit, interpret=True, wall_s=60)
        r = run_sandboxed("kernelband.sandbox.probes:load_module", {"source": candidate}, limits)
        out[f"candidate warm={warm} audit={audit}"] = {
            "ok": r.ok, "value": r.value, "message": r.message, "stderr": r.stderr_tail}
    try:
        load_problem_sandboxed(problem, "native", "attack", SandboxLimits(warm=warm, interpret=True))
        out[f"problem warm={warm}"] = "loaded"
    except ProblemLoadError as exc:
        out[f"problem warm={warm}"] = str(exc)
shutdown_pool()
print("RESULTS " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def attack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Run the attacks from a service process that holds the canaries; its parsed results."""
    problem_jail = jail.jail_problem()
    if problem_jail:
        pytest.skip(f"bwrap cannot run on this machine ({problem_jail}): the jail is not tested")
    tmp = tmp_path_factory.mktemp("jail")
    canary = f"canary-{uuid.uuid4().hex}"
    data_dir = tmp / "kernelband-data"
    data_dir.mkdir()
    database = data_dir / "kernelband.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("create table t (secret text)")
        conn.execute("insert into t values (?)", (canary,))
    other = Path(jail.runs_parent()) / f"kb-sandbox-other-{uuid.uuid4().hex[:8]}"
    other.mkdir()
    (other / "problem.py").write_text(f"# another team's problem {canary}\n")
    paths = {"data_dir": str(data_dir), "database": str(database),
             "other_run": str(other / "problem.py")}
    candidate = tmp / "candidate.py"
    candidate.write_text(f"PATHS = {paths!r}\n{ATTACK}")
    problem = tmp / "problem.py"
    original = example("vector_add").read_text()
    problem.write_text(original.replace("import torch\n", "import torch\nPATHS = "
                                        f"{dict(paths, **{'raise': True})!r}\n{ATTACK}\n", 1))
    env = {**os.environ, "KERNELBAND_LLM_API_KEY": canary, "KERNELBAND_DATA_DIR": str(data_dir),
           "KERNELBAND_DATABASE_URL": f"postgresql://kb:{canary}-pw@127.0.0.1:5432/kb"}
    try:
        done = subprocess.run([sys.executable, "-c", SERVICE, str(candidate), str(problem)],
                              capture_output=True, text=True, timeout=600, env=env, check=False)
    finally:
        (other / "problem.py").unlink()
        other.rmdir()
    output = done.stdout + done.stderr
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULTS ")), None)
    assert line is not None, output[-3000:]
    yield {"canary": canary, "output": output, "results": json.loads(line.removeprefix("RESULTS "))}


def _reports(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every scenario's attack report: a candidate's value, a problem load's error text."""
    reports = {}
    for name, outcome in results.items():
        if name.startswith("candidate"):
            assert outcome["ok"], f"{name}: {outcome}"
            reports[name] = outcome["value"]
        elif name.startswith("problem"):
            assert "REPORT " in outcome, f"{name}: {outcome}"
            reports[name] = json.JSONDecoder().raw_decode(outcome.split("REPORT ", 1)[1])[0]
    assert len(reports) == 6
    return reports


def test_the_attacks_ran_jailed_and_record_their_level(
        attack: dict[str, Any], record_property: Any) -> None:
    level = attack["results"]["level"]
    record_property("isolation_level", level)
    assert level == "jail:bwrap"
    for name, report in _reports(attack["results"]).items():
        assert report["uid"] == jail.JAIL_UID, name
        assert len(report["pids"]) <= 3, f"{name}: /proc shows more than its own run: {report}"


def test_no_ancestor_environment_or_working_dir_is_visible(attack: dict[str, Any]) -> None:
    for name, report in _reports(attack["results"]).items():
        assert report["environ_with_key"] == [], name
        assert report["ancestors"] in ([], [1]), f"{name}: sees ancestors {report['ancestors']}"
        assert not {"kernelband-data", "kernelband.sqlite"} & set(report["ancestor_cwd_names"]), name


@pytest.mark.parametrize("attempt", ["data_dir", "database", "sqlite", "other_run", "shadow",
                                     "home", "postgres"])
def test_each_attempt_fails_inside_the_jail(attack: dict[str, Any], attempt: str) -> None:
    for name, report in _reports(attack["results"]).items():
        assert report[attempt]["ok"] is False, f"{name}: {attempt} -> {report[attempt]}"


def test_other_runs_and_root_are_not_in_the_view(attack: dict[str, Any]) -> None:
    for name, report in _reports(attack["results"]).items():
        listing = report["runs_listing"]
        assert "kb-sandbox-other" not in listing.get("got", ""), f"{name}: {listing}"
        root = report["root"]
        assert root["ok"] is False or root["got"] == "['.pyenv']", f"{name}: /root shows {root}"


def test_the_canaries_appear_nowhere(attack: dict[str, Any]) -> None:
    assert attack["canary"] not in attack["output"]
    assert attack["canary"] not in json.dumps(attack["results"])


def test_scrub_secrets_redacts_secret_variables_and_url_passwords(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "sk-canary-123456")
    monkeypatch.setenv("SOME_DATABASE_URL", "postgresql://kb:pw-canary-42@db:5432/kb")
    monkeypatch.setenv("HARMLESS", "sk-canary-123456-is-also-here")
    text = scrub_secrets("key sk-canary-123456, dsn postgresql://kb:pw-canary-42@db:5432/kb, "
                         "password alone pw-canary-42")
    assert "canary" not in text and text.count(REDACTED) == 3


def test_a_run_message_is_scrubbed_of_the_parents_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    # the child never has the key; a message that carries it anyway (here: the payload echoed
    # back in an exception) reaches the caller redacted
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "sk-canary-in-a-message")
    result = run_sandboxed("kernelband.sandbox.probes:does_not_exist_sk-canary-in-a-message", {},
                           SandboxLimits(interpret=True, warm=False))
    assert not result.ok
    assert "sk-canary-in-a-message" not in result.message + result.stderr_tail
    assert REDACTED in result.message + result.stderr_tail


@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl"), reason="no GPU on this machine")
@pytest.mark.parametrize("warm", [True, False])
def test_the_gpu_is_visible_inside_the_jail(warm: bool) -> None:
    if jail.jail_problem():
        pytest.skip(f"bwrap cannot run here: {jail.jail_problem()}")
    try:
        result = run_sandboxed("kernelband.sandbox.probes:cuda_visible", {},
                               SandboxLimits(warm=warm, isolation="jail", wall_s=120))
    finally:
        shutdown_pool()
    assert result.ok, result.message + result.stderr_tail
    assert result.value["available"] is True and result.value["count"] >= 1, result.value


def test_a_result_built_anywhere_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    # runner sessions and deserialised task results build SandboxResult themselves
    monkeypatch.setenv("KERNELBAND_LLM_API_KEY", "sk-canary-built-by-hand")
    result = SandboxResult(False, reason="exit:1", message="key sk-canary-built-by-hand",
                           stderr_tail="sk-canary-built-by-hand")
    assert (result.message, result.stderr_tail) == (f"key {REDACTED}", REDACTED)
    assert SandboxResult.from_dict(result.to_dict()) == result


# host device nodes that bwrap's minimal /dev lacks: one stands in for a GPU's /dev/nvidia*
STAND_INS = ("/dev/kmsg", "/dev/loop-control", "/dev/cpu_dma_latency", "/dev/fuse")


@pytest.fixture
def fake_gpu_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A host device node bound into jails as a GPU's would be."""
    node = next((path for path in STAND_INS if os.path.exists(path)), None)
    if node is None:
        pytest.skip(f"none of {STAND_INS} exists on this machine to stand in for a GPU device")
    monkeypatch.setattr(jail, "_GPU_DEVICES", (node,))
    jail.runtime_args.cache_clear()
    shutdown_pool()  # zygotes made before hold the runtime they started with
    yield node
    shutdown_pool()
    jail.runtime_args.cache_clear()


@pytest.mark.parametrize("warm", [True, False])
def test_an_interpreter_run_has_no_gpu_device_in_its_jail(fake_gpu_device: str, warm: bool) -> None:
    if jail.jail_problem():
        pytest.skip(f"bwrap cannot run here: {jail.jail_problem()}")
    seen = {}
    for interpret in (False, True):
        result = run_sandboxed("kernelband.sandbox.probes:exists", {"paths": [fake_gpu_device]},
                               SandboxLimits(interpret=interpret, warm=warm, isolation="jail", wall_s=60))
        assert result.ok, result.message + result.stderr_tail
        seen[interpret] = result.value[fake_gpu_device]
    assert seen == {False: True, True: False}


def test_the_runtime_binds_gpu_devices_only_when_asked(fake_gpu_device: str) -> None:
    with_gpu, without = " ".join(jail.runtime_args(True)), " ".join(jail.runtime_args(False))
    assert f"--dev-bind {fake_gpu_device} {fake_gpu_device}" in with_gpu
    assert fake_gpu_device not in without
