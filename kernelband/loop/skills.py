"""The team skill library: verified improvements of a team, retrieved as one-shot examples.

An improvement enters the bank when a child passes the public-case correctness check and is
measured faster than its parent; the entry keeps parent and child region, strategy, target,
speedup and its label (measured | estimated). Retrieval ranks the built-in bank and the
team's entries together and never reads another team's entries. A team with the library
switched off neither adds nor retrieves entries.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, bindparam, func, or_, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Measurement, Problem, Skill, Team, Track, utcnow
from kernelband.db.row_buffer import add_row
from kernelband.generate.example_bank import Example
from kernelband.generate.skills import example_dict, rank_examples

TEAM_BANK_LIMIT = 200  # newest entries of the strategy that take part in a retrieval
# session.info: (transaction, Prefetched) for the batch of results being applied
_PREFETCHED = "kb_skill_facts"
class Prefetched:
    """What `record_skill` reads for a batch: parents' newest times per target, parents'
    source, teams' library switches and problems' names, each read once for the batch."""

    def __init__(self) -> None:
        self.parent_times: dict[tuple[int, str], float | None] = {}
        self.parent_code: dict[int, str] = {}
        self.skill_library: dict[int, bool] = {}  # per team
        self.problem_name: dict[int, str] = {}


def prefetch_for_skills(session: Session, measured: list[tuple[Job, Track, Candidate]]) -> None:
    """Everything `record_skill` reads for a batch of measured children, in two queries of
    plain columns (the jobs' team switches and problem names; the parents' source with their
    measurements), kept in the session for this transaction (no row loaded as an object)."""
    if not measured:
        return
    facts = Prefetched()
    pairs = {(c.parent_id, t.target) for _, t, c in measured if c.parent_id is not None}
    facts.parent_times = dict.fromkeys(pairs)
    statements = _statements(session.get_bind().dialect.name)
    if pairs:
        parents = sorted({p for p, _ in pairs})
        for parent_id, editable, target, time_ms in session.execute(statements.parents,
                                                                    {"parents": parents}):
            facts.parent_code[parent_id] = editable
            if (parent_id, target) in facts.parent_times:  # newest last: it overwrites older ones
                facts.parent_times[(parent_id, target)] = time_ms
    jobs = sorted({j.id for j, _, _ in measured})
    for team_id, skill_library, problem_id, name in session.execute(statements.teams,
                                                                    {"jobs": jobs}):
        facts.skill_library[team_id] = skill_library
        facts.problem_name[problem_id] = name
    session.info[_PREFETCHED] = (session.get_transaction(), facts)


class _Statements:
    """The prefetch's two reads for one dialect, built once: building them per batch (a
    lateral subquery, joins, their cache keys) cost the scheduler more than running them."""

    def __init__(self, postgres: bool) -> None:
        self.parents = _parents_with_times(postgres)
        jobs = (Job.id == func.any(bindparam("jobs", type_=ARRAY(Integer))) if postgres
                else Job.id.in_(bindparam("jobs", expanding=True)))
        self.teams = (select(Team.id, Team.skill_library, Problem.id, Problem.name)
                      .select_from(Job).join(Team, Team.id == Job.team_id)
                      .join(Problem, Problem.id == Job.problem_id).where(jobs))


_BUILT: dict[str, _Statements] = {}


def _statements(dialect: str) -> _Statements:
    if dialect not in _BUILT:
        _BUILT[dialect] = _Statements(dialect == "postgresql")
    return _BUILT[dialect]


def _parents_with_times(postgres: bool) -> Any:
    """(parent id, its source, target, time_ms) per measurement of each parent, oldest first
    (a parent without one: a row with no target); the parents' ids bound as `parents`. On
    Postgres each parent's measurements are an index probe (a lateral join kept one by
    `OFFSET 0`): with an IN list a planner without fresh statistics scanned every
    measurement, a read that grew with every pull."""
    if not postgres:  # no lateral join (SQLite: tests)
        return (select(Candidate.id, Candidate.editable, Measurement.target, Measurement.time_ms)
                .outerjoin(Measurement, Measurement.candidate_id == Candidate.id)
                .where(Candidate.id.in_(bindparam("parents", expanding=True)))
                .order_by(Candidate.id, Measurement.id))
    parents = (select(Candidate.id, Candidate.editable)
               .where(Candidate.id == func.any(bindparam("parents", type_=ARRAY(Integer))))
               .subquery("parent"))
    times = (select(Measurement.id, Measurement.target, Measurement.time_ms)
             .where(Measurement.candidate_id == parents.c.id).offset(0).lateral("parent_time"))
    return (select(parents.c.id, parents.c.editable, times.c.target, times.c.time_ms)
            .select_from(parents).outerjoin(times, true()).order_by(parents.c.id, times.c.id))


def _prefetched(session: Session) -> Prefetched | None:
    held = session.info.get(_PREFETCHED)
    return held[1] if held is not None and held[0] is session.get_transaction() else None


def _parent_time(session: Session, child: Candidate, target: str) -> float | None:
    if child.parent_id is None:
        return None
    facts = _prefetched(session)
    if facts is not None and (child.parent_id, target) in facts.parent_times:
        return facts.parent_times[(child.parent_id, target)]
    query = (select(Measurement.time_ms).where(Measurement.candidate_id == child.parent_id,
                                               Measurement.target == target)
             .order_by(Measurement.id.desc()).limit(1))
    return session.scalars(query).first()


def _skill_library(session: Session, team_id: int) -> bool:
    facts = _prefetched(session)
    if facts is not None and team_id in facts.skill_library:
        return facts.skill_library[team_id]
    return session.get_one(Team, team_id).skill_library


def _problem_name(session: Session, problem_id: int) -> str:
    facts = _prefetched(session)
    if facts is not None and problem_id in facts.problem_name:
        return facts.problem_name[problem_id]
    return session.get_one(Problem, problem_id).name


def _parent_code(session: Session, parent_id: int) -> str:
    facts = _prefetched(session)
    if facts is not None and parent_id in facts.parent_code:
        return facts.parent_code[parent_id]
    return session.get_one(Candidate, parent_id).editable


def record_skill(session: Session, job: Job, track: Track, child: Candidate,
                 measurement: Measurement) -> bool:
    """Add the child to its team's bank when it is faster than its parent (and the bank is on);
    whether it was added. A buffered row (`row_buffer`): one INSERT for a batch's entries,
    where an object each cost the unit of work several times its row."""
    if not _skill_library(session, job.team_id) or not child.strategy:
        return False
    parent_ms = _parent_time(session, child, track.target)
    if not parent_ms or child.parent_id is None:
        return False
    if measurement.time_ms <= 0 or measurement.time_ms >= parent_ms:
        return False
    speedup = parent_ms / measurement.time_ms
    name = _problem_name(session, job.problem_id)
    add_row(session, Skill, {
        "team_id": job.team_id, "job_id": job.id, "candidate_id": child.id, "problem_name": name,
        "strategy": child.strategy, "target": track.target,
        "before": _parent_code(session, child.parent_id), "after": child.editable,
        "speedup": speedup, "label": measurement.label,
        "description": f"{name}: {child.strategy} on {track.target}, {speedup:.2f}x "
                       f"faster than its parent ({measurement.label})",
        "created_at": utcnow()})
    return True


def skill_example(session: Session, job: Job, parent_code: str,
                  strategy: str | None) -> dict[str, str] | None:
    """The best example over the built-in bank and this team's entries from other jobs.

    None when the team's library is off or holds nothing for the strategy: the worker then
    retrieves from the built-in bank alone, exactly as before.
    """
    team = session.get_one(Team, job.team_id)
    if not team.skill_library:
        return None
    query = select(Skill).where(Skill.team_id == job.team_id,
                                or_(Skill.job_id.is_(None), Skill.job_id != job.id))
    if strategy is not None:
        query = query.where(Skill.strategy == strategy)
    rows = session.scalars(query.order_by(Skill.id.desc()).limit(TEAM_BANK_LIMIT)).all()
    if not rows:
        return None
    bank = [Example(id=f"team:{r.id}", strategy=r.strategy, title=r.description,
                    before=r.before, after=r.after) for r in rows]
    best = rank_examples(parent_code, strategy, bank)
    return None if best is None else example_dict(best)
