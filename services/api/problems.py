"""Validating and storing submitted problems; the user's module only ever runs in the sandbox."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from kernelband.db.models import Problem
from kernelband.problem.model import KernelProblem, ProblemLoadError, problem_hash
from kernelband.profile.perf_harness import HarnessError, with_perf_harness
from kernelband.sandbox import load_problem_sandboxed
from services.api.errors import ApiError

# (source, format, name) -> KernelProblem, raising ProblemLoadError for an invalid file.
ProblemLoader = Callable[[str, str, str], KernelProblem]


def sandboxed_loader(source: str, format: str, name: str) -> KernelProblem:
    """Load a problem in a sandbox child process (never in the API process)."""
    return load_problem_sandboxed(source, format, name)


def content_hash(source: str, format: str, perf_source: str = "") -> str:
    """The same hash as `KernelProblem.content_hash`, computable before loading."""
    return problem_hash(source, format, perf_source)


def attach_perf_or_reject(problem: KernelProblem, perf_source: str) -> KernelProblem:
    """The problem with its performance harness; an unusable harness becomes a 422."""
    try:
        return with_perf_harness(problem, perf_source)
    except HarnessError as exc:
        raise ApiError(422, "invalid_perf_harness", f"{exc}. Fix perf_source and submit again.") from exc


def check_size(source: str, max_bytes: int) -> None:
    """413 when the source is larger than the server accepts."""
    size = len(source.encode())
    if size > max_bytes:
        raise ApiError(
            413, "source_too_large",
            f"The problem source is {size} bytes; this server accepts at most {max_bytes} bytes "
            "(KERNELBAND_MAX_SOURCE_BYTES). Submit a smaller file with only the kernel, its "
            "reference and its cases.",
        )


def find_problem(session: Session, team_id: int, digest: str) -> Problem | None:
    """The team's stored problem with this content hash, if any."""
    stmt = select(Problem).where(Problem.team_id == team_id, Problem.content_hash == digest)
    return session.scalars(stmt).first()


def load_or_reject(loader: ProblemLoader, source: str, format: str, name: str) -> KernelProblem:
    """Run the loader; an invalid file becomes a 422 carrying the loader's reason."""
    try:
        return loader(source, format, name)
    except ProblemLoadError as exc:
        where = f" (line {exc.line})" if exc.line else ""
        raise ApiError(
            422, "invalid_problem",
            f"The {format} problem '{name}' could not be loaded: {exc.reason}{where}. Fix the "
            "file and submit again; `kernelband check FILE` gives the same verdict locally.",
        ) from exc


def new_problem(team_id: int, problem: KernelProblem, digest: str) -> Problem:
    """A Problem row for a freshly loaded problem."""
    return Problem(
        team_id=team_id, name=problem.name, format=problem.format, content_hash=digest,
        source=problem.source, loaded=problem.to_dict(),
    )
