"""The downloadable best kernel: the problem module with the best region, plus provenance."""

from __future__ import annotations

from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Problem, Track
from kernelband.problem.model import KernelProblem
from kernelband.speedups import of_track
from services.api import queries
from services.api.ids import public

_MAX_LINEAGE = 200  # a guard against a corrupted parent cycle


def lineage(session: Session, candidate: Candidate) -> list[Candidate]:
    """The candidate and its ancestors, original first."""
    chain = [candidate]
    while chain[-1].parent_id is not None and len(chain) < _MAX_LINEAGE:
        parent = session.get(Candidate, chain[-1].parent_id)
        if parent is None:
            break
        chain.append(parent)
    return chain[::-1]


def _module_text(problem: Problem, candidate: Candidate) -> tuple[str, str]:
    """(module text, note): the full module when the region can be spliced back in."""
    if candidate.parent_id is None:
        return problem.source, "the submitted kernel (no faster verified variant yet)"
    try:
        return KernelProblem.from_dict(problem.loaded).splice(candidate.editable), ""
    except (ImportError, KeyError, TypeError, ValueError) as exc:
        # Without a splice the region alone is still the useful artifact; say so.
        return candidate.editable, f"editable region only (could not splice: {exc})"


def _time_line(session: Session, track: Track) -> str:
    m = queries.best_measurement(session, track)
    if m is None:
        return "time: none recorded"
    final = ", re-measured against the original at the end" if track.best_speedup_final else ""
    return (f"time: {m.time_ms:.6g} ms, speedup {of_track(track).text()} over the original"
            f"{final}, {m.label} ({m.method} on {m.device})")


def best_kernel_file(session: Session, job: Job, problem: Problem, track: Track) -> str:
    """The best kernel of a track as a Python module with a provenance header comment."""
    assert track.best_candidate_id is not None
    best = session.get(Candidate, track.best_candidate_id)
    assert best is not None  # foreign key
    text, note = _module_text(problem, best)
    steps = [c.strategy or "original" for c in lineage(session, best)]
    header = [
        f"# KernelBand best kernel for target {track.target}",
        f"# job {public('job', job.id)}, problem '{problem.name}' ({problem.format}, sha256 "
        f"{problem.content_hash[:16]}), candidate {public('cand', best.id)}",
        f"# lineage: {' -> '.join(steps)}",
        f"# {_time_line(session, track)}",
        f"# held-out cases: {track.held_out or 'not checked yet'}; policy {job.policy}, "
        f"generator {job.model or job.generator}",
    ]
    if note:
        header.append(f"# note: {note}")
    return "\n".join(header) + "\n\n" + text
