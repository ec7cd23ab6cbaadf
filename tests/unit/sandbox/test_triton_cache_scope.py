"""Each job's runs get a Triton cache of their own: a run can neither read what another job's
runs compiled nor plant an entry (a launcher is native code) that another job's run would load.

Runs the real jail (bubblewrap), warm (forked from the zygote) and cold, on the interpreter.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kernelband.sandbox import SandboxLimits, jail, job_limits, run_sandboxed
from kernelband.sandbox.limits import default_triton_cache_dir, triton_cache_dir, triton_caches_root

PROBE = r'''
import os
cache = os.environ["TRITON_CACHE_DIR"]

def _try(fn):
    try:
        return {"ok": True, "got": fn()}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}

REPORT = {
    "cache": cache,
    "listing": sorted(os.listdir(cache)),
    "siblings": _try(lambda: sorted(os.listdir(os.path.dirname(cache)))),
    "read": _try(lambda: open(TARGET).read()) if TARGET else None,
}
if PLANT:
    with open(os.path.join(cache, PLANT), "w") as f:
        f.write("planted")
'''


@pytest.fixture
def scopes() -> Iterator[tuple[str, str]]:
    problem = jail.jail_problem()
    if problem:
        pytest.skip(f"bwrap cannot run on this machine ({problem}): the jail is not tested")
    pair = (f"t{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:10]}")
    yield pair
    for scope in pair:
        shutil.rmtree(triton_cache_dir(SandboxLimits(cache_scope=scope)), ignore_errors=True)


def _probe(job: str, warm: bool, plant: str = "", target: str = "") -> dict[str, Any]:
    with job_limits(None, job):
        limits = SandboxLimits.from_settings(warm=warm, interpret=True, wall_s=60)
    assert limits.cache_scope == job
    source = f"PLANT = {plant!r}\nTARGET = {target!r}\n{PROBE}"
    result = run_sandboxed("kernelband.sandbox.probes:load_module", {"source": source}, limits)
    assert result.ok, f"{result.reason}: {result.message} {result.stderr_tail[-500:]}"
    assert isinstance(result.value, dict)
    return result.value


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_jobs_runs_share_its_cache_and_no_other_jobs_run_sees_it(scopes: tuple[str, str], warm: bool) -> None:
    ours, theirs = scopes
    planted = f"planted-{uuid.uuid4().hex[:8]}"
    first = _probe(ours, warm, plant=planted)
    assert first["cache"] == triton_cache_dir(SandboxLimits(cache_scope=ours))
    assert first["cache"].startswith(triton_caches_root()) and first["cache"] != default_triton_cache_dir()
    entry = os.path.join(first["cache"], planted)
    assert os.path.exists(entry)  # written where the job's next runs look

    other = _probe(theirs, warm, target=entry)
    assert other["cache"] != first["cache"] and planted not in other["listing"]
    assert other["read"] == {"ok": False, "error": "FileNotFoundError"}  # not in its view at all
    siblings = other["siblings"]
    assert not siblings["ok"] or os.path.basename(first["cache"]) not in siblings["got"]

    again = _probe(ours, warm, target=entry)
    assert planted in again["listing"] and again["read"] == {"ok": True, "got": "planted"}


def test_runs_outside_a_job_use_the_shared_cache_and_a_scope_must_be_a_plain_name() -> None:
    assert SandboxLimits.from_settings().cache_scope == ""
    assert triton_cache_dir(SandboxLimits()) == default_triton_cache_dir()
    with pytest.raises(ValueError, match="letters, digits"):
        triton_cache_dir(SandboxLimits(cache_scope="../shared"))
