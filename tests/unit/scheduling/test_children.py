"""Generated children: one INSERT per batch, each child a loaded row with its id, once per
attempt and transaction."""

from __future__ import annotations

import ast
from pathlib import Path

from scheduling_fakes import make_job
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session, sessionmaker

from kernelband.db.models import Attempt, Candidate, Track
from kernelband.db.session import session_scope
from kernelband.generate.normalize import normalized_source, source_hash
from kernelband.scheduling.children import child_row, generated_child, insert_children
from kernelband.scheduling.ingest import lock_attempt
from tests.utils.sql_log import sent_statements


def _generate_attempts(factory: sessionmaker[Session], count: int) -> list[int]:
    """`count` generate attempts of one job's track, each of the track's original."""
    job_id = make_job(factory)
    with session_scope(factory) as session:
        track = Track(job_id=job_id, target="cpu", status="running")
        session.add(track)
        session.flush()
        original = Candidate(track_id=track.id, editable="ORIGINAL", status="measured")
        session.add(original)
        session.flush()
        attempts = [Attempt(job_id=job_id, track_id=track.id, kind="generate", state="running",
                            decision_id=f"d{i}", candidate_id=original.id, queue="generate",
                            payload={"strategy": f"s{i}", "turn": i % 2,
                                     **({"repair": {"failed_candidate": original.id}}
                                        if i == 1 else {})})
                    for i in range(count)]
        session.add_all(attempts)
        session.flush()
        return [attempt.id for attempt in attempts]


def test_children_of_a_batch_go_in_one_insert_with_their_ids(
        db_factory: sessionmaker[Session]) -> None:
    attempt_ids = _generate_attempts(db_factory, 3)
    with (sent_statements(db_factory.kw["bind"], "INSERT INTO candidates") as sent,
          session_scope(db_factory) as session):
        locked = [lock_attempt(session, i) for i in attempt_ids]
        wanted = [(row[1], row[0], f"code {n}", row[3])
                  for n, row in enumerate(locked) if row is not None]
        children = insert_children(session, [*wanted, wanted[0]])  # a repeat: inserted once
        one_insert = db_factory.kw["bind"].dialect.name == "postgresql"  # SQLite: one a row
        assert len(sent) == (1 if one_insert else 3) and children[3] is children[0]
        assert [c.editable for c in children[:3]] == ["code 0", "code 1", "code 2"]
        assert all(inspect(c).persistent and c not in session.dirty for c in children)
        again = generated_child(session, wanted[1][0], wanted[1][1], "ignored")
        assert again is children[1] and len(sent) == (1 if one_insert else 3)  # once each
        children[2].status = "rejected"  # a loaded row's change is flushed as any other
    with session_scope(db_factory) as session:
        stored = session.scalars(select(Candidate).where(Candidate.id.in_(
            [c.id for c in children])).order_by(Candidate.id)).all()
    assert [c.editable for c in stored] == ["code 0", "code 1", "code 2"]
    assert [c.decision_id for c in stored] == ["d0", "d1", "d2"]
    assert [c.strategy for c in stored] == ["s0", "s1", "s2"]
    assert [c.turn for c in stored] == [0, 1, 0]
    assert [c.status for c in stored] == ["generated", "generated", "rejected"]
    assert [c.repair_of is not None for c in stored] == [False, True, False]
    assert all(c.lineage_depth == 1 and c.source_hash == source_hash(c.editable)
               and c.static_profile is None and c.created_at is not None for c in stored)


def test_a_child_row_names_every_column_but_the_id(db_factory: sessionmaker[Session]) -> None:
    attempt_id = _generate_attempts(db_factory, 1)[0]
    with session_scope(db_factory) as session:
        row = lock_attempt(session, attempt_id)
        assert row is not None and row[3] is not None
        names = set(child_row(row[1], row[0], "code", row[3]))
    # a column left out would be read back from the database on first use
    assert names == {c.key for c in Candidate.__table__.columns} - {"id"}


def _reference(code: str) -> str:
    """The normalised text as ast.walk and ast.dump give it (what stored hashes were made of)."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def test_a_childs_normalised_source_is_the_text_stored_hashes_were_made_of() -> None:
    nested = ('"""m"""\nif x:\n    def f():\n        "doc"\nelse:\n    try:\n        pass\n'
              '    except E:\n        class C:\n            """c"""\n            x = 1\n'
              '    finally:\n        while y:\n            async def g():\n                "d"\n'
              '                return "kept"\nmatch v:\n    case 1:\n        def h():\n'
              '            "h"\n            "second string stays"\n')
    package = Path(__file__).resolve().parents[3] / "kernelband"
    sources = [nested, *(p.read_text() for p in sorted(package.rglob("*.py")))]
    for code in sources:
        assert normalized_source(code) == _reference(code)
    assert "doc" not in normalized_source(nested) and "second string stays" in normalized_source(
        nested)
