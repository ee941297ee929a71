"""Appending to a large database reads only the stored keys the new rows touch."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
import sqlalchemy as sa

from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.synth import generate
from clinieval.testing import CountingConnection, CountingCursor, later_revisions


def test_append_fetches_only_the_keys_the_new_rows_refer_to(tmp_path):
    snap = generate(seed=3, scale=0.01)
    engine = db.make_engine(f"sqlite:///{tmp_path / 'big.db'}",
                            connect_args={"factory": CountingConnection})
    db.upgrade(engine)
    import_snapshot(engine, snap)
    stored = snap["ratings"].num_rows
    append = later_revisions(snap, 1_000)

    CountingCursor.fetched = 0
    assert import_snapshot(engine, append)["ratings"] == 1_000
    referenced = sum(pc.count_distinct(append["ratings"].column(c)).as_py()
                     for c in ("answer_id", "rater_id", "criterion_id"))
    # Each referenced key once, plus the stored rater-id flag and one "any raters?" row.
    assert referenced <= CountingCursor.fetched <= referenced + 2
    assert stored > 3 * CountingCursor.fetched
    assert db.counts(engine)["ratings"] == stored + 1_000
    engine.dispose()


def test_an_import_leaves_planner_statistics_on_postgresql(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("planner statistics of PostgreSQL")
    import_snapshot(engine, generate(seed=3, scale=0.01))
    with engine.connect() as conn:
        analyzed = conn.execute(sa.text(
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = current_schema()"
            " AND last_analyze IS NOT NULL")).scalars().all()
    assert {"ratings", "answers", "preferences", "answer_load"} <= set(analyzed)
