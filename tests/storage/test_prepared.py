"""Prepared statements run on the driver (storage.prepared) give the rows,
types and errors that SQLAlchemy's own execution gives."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from clinieval.platform.events import now
from clinieval.storage import prepared
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema.platform import audit_events, study_rubrics
from clinieval.storage.schema.snapshot import studies


def test_rows_and_types_match_sqlalchemy(app, engine):
    events = sa.select(audit_events).where(audit_events.c.kind == sa.bindparam("kind")) \
        .order_by(audit_events.c.event_id)
    rubrics = sa.select(study_rubrics.c.study_id, study_rubrics.c.rationale_required,
                        sa.literal(None).label("empty")).order_by(study_rubrics.c.study_id)
    at = now()
    with engine.begin() as conn:
        for detail in ("{}", None):
            run(conn, prepared.insert(audit_events, "at", "kind", "user_id", "subject",
                                      "detail"),
                {"at": at, "kind": "probe", "user_id": None, "subject": "s", "detail": detail})
    with engine.connect() as conn:
        for statement, params in ((events, {"kind": "probe"}), (rubrics, {})):
            ours = run(conn, Prepared(statement), params)
            theirs = conn.execute(statement, params).all()
            assert [tuple(r) for r in ours] == [tuple(r) for r in theirs]
            assert [[type(v) for v in r] for r in ours] == [[type(v) for v in r] for r in theirs]
        stored = run(conn, Prepared(events), {"kind": "probe"})
        assert len(stored) == 2 and stored.first().at.replace(tzinfo=None) == \
            at.replace(tzinfo=None)
        assert run(conn, Prepared(events), {"kind": "none such"}).first() is None


def test_driver_errors_are_sqlalchemy_errors(app, engine):
    with engine.connect() as conn:
        row = conn.execute(sa.select(studies).where(studies.c.study_id == "x")).one()
    again = prepared.insert(studies, *row._mapping.keys())
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        run(conn, again, dict(row._mapping))


def test_statements_that_depend_on_their_values_fall_back(app, engine):
    statement = sa.select(studies.c.study_id).where(
        studies.c.study_id.in_(sa.bindparam("ids", expanding=True))).order_by("study_id")
    assert Prepared(statement).plan(engine.dialect) is None
    with engine.connect() as conn:
        assert run(conn, Prepared(statement), {"ids": ["x", "y"]}).scalars().all() == ["x", "y"]
