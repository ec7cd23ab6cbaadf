"""The team skill library: verified improvements of a team, retrieved as one-shot examples.

An improvement enters the bank when a child passes the public-case correctness check and is
measured faster than its parent; the entry keeps parent and child region, strategy, target,
speedup and its label (measured | estimated). Retrieval ranks the built-in bank and the
team's entries together and never reads another team's entries. A team with the library
switched off neither adds nor retrieves entries.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from kernelband.db.models import Candidate, Job, Measurement, Problem, Skill, Team, Track
from kernelband.generate.example_bank import Example
from kernelband.generate.skills import example_dict, rank_examples

TEAM_BANK_LIMIT = 200  # newest entries of the strategy that take part in a retrieval
_PARENT_TIMES = "kb_parent_times"  # session.info: (transaction, {(parent id, target): ms})


def prefetch_for_skills(session: Session, measured: list[tuple[Job, Track, Candidate]]) -> list[Any]:
    """Everything `record_skill` reads for a batch of measured children, in one query per table.

    Parents' times go to the session (for this transaction); the returned rows must be kept
    while the batch is applied: the identity map holds rows weakly, and `session.get_one`
    finds them there without a query (and so without flushing the batch one result at a time).
    """
    if not measured:
        return []
    pairs = {(c.parent_id, t.target) for _, t, c in measured if c.parent_id is not None}
    times: dict[tuple[int, str], float | None] = dict.fromkeys(pairs)
    if pairs:
        query = (select(Measurement.candidate_id, Measurement.target, Measurement.time_ms)
                 .where(Measurement.candidate_id.in_({p for p, _ in pairs}))
                 .order_by(Measurement.id))  # the newest last: it overwrites older ones
        for candidate_id, target, time_ms in session.execute(query):
            if (candidate_id, target) in times:
                times[(candidate_id, target)] = time_ms
    session.info[_PARENT_TIMES] = (session.get_transaction(), times)
    held: list[Any] = []
    for model, ids in ((Team, {j.team_id for j, _, _ in measured}),
                       (Problem, {j.problem_id for j, _, _ in measured}),
                       (Candidate, {p for p, _ in pairs})):
        if ids:
            held += session.scalars(select(model).where(model.id.in_(ids))).all()
    return held


def _parent_time(session: Session, child: Candidate, target: str) -> float | None:
    if child.parent_id is None:
        return None
    held = session.info.get(_PARENT_TIMES)
    if held is not None and held[0] is session.get_transaction():
        prefetched = held[1]
        if (child.parent_id, target) in prefetched:
            return prefetched[(child.parent_id, target)]
    query = (select(Measurement.time_ms).where(Measurement.candidate_id == child.parent_id,
                                               Measurement.target == target)
             .order_by(Measurement.id.desc()).limit(1))
    return session.scalars(query).first()


def record_skill(session: Session, job: Job, track: Track, child: Candidate,
                 measurement: Measurement) -> Skill | None:
    """Add the child to its team's bank when it is faster than its parent (and the bank is on)."""
    team = session.get_one(Team, job.team_id)
    parent_ms = _parent_time(session, child, track.target)
    if not team.skill_library or not child.strategy or not parent_ms:
        return None
    if measurement.time_ms <= 0 or measurement.time_ms >= parent_ms:
        return None
    parent = session.get_one(Candidate, child.parent_id)
    speedup = parent_ms / measurement.time_ms
    name = session.get_one(Problem, job.problem_id).name
    skill = Skill(team_id=job.team_id, job_id=job.id, candidate_id=child.id, problem_name=name,
                  strategy=child.strategy, target=track.target, before=parent.editable,
                  after=child.editable, speedup=speedup, label=measurement.label,
                  description=f"{name}: {child.strategy} on {track.target}, {speedup:.2f}x "
                              f"faster than its parent ({measurement.label})")
    session.add(skill)
    return skill


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
