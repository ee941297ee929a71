"""The ``engine`` fixture copies one migrated database per pytest process
(tests/conftest.py) instead of migrating each test's own; a copy must be
what the migrations make, on both backends, or every test using it would
test another schema."""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.storage import db
from tests.conftest import copy_template, schema_of, schema_url


def _sqlite_shape(conn) -> list:
    """Each table's and index's statement, its clauses as a set: Alembic's
    batch rebuilds list a table's foreign keys in an order that differs
    between processes (string hashing), as two migrated files do."""
    return [(kind, name, table, sorted(part.strip().rstrip(",").strip()
                                       for part in (sql or "").splitlines()))
            for kind, name, table, sql in conn.exec_driver_sql(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")]


def _postgres_shape(conn, schema: str) -> list:
    """Columns, constraints, indexes and sequences of ``schema``, its name taken out."""
    queries = [
        ("SELECT table_name, column_name, data_type, column_default, is_nullable,"
         " character_maximum_length, numeric_precision FROM information_schema.columns"
         " WHERE table_schema = :s ORDER BY table_name, ordinal_position"),
        ("SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)"
         " FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace"
         " WHERE n.nspname = :s ORDER BY 1, 2"),
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = :s ORDER BY 1, 2",
        ("SELECT sequence_name, start_value, increment FROM information_schema.sequences"
         " WHERE sequence_schema = :s ORDER BY 1"),
    ]
    shape = []
    for query in queries:
        for row in conn.execute(sa.text(query), {"s": schema}):
            shape.append(tuple(str(v).replace(schema, "<schema>") for v in row))
    return shape


def _rows(engine) -> dict:
    with engine.connect() as conn:
        names = sa.inspect(conn).get_table_names()
        return {name: sorted(map(tuple, conn.execute(sa.text(f'SELECT * FROM "{name}"'))))
                for name in names}


def _facts(engine) -> tuple:
    return db.current_revision(engine), _rows(engine), db.counts(engine)


def test_a_copied_template_is_the_migrated_database(db_url, migrated_templates, tmp_path):
    """Same tables, columns, constraints, indexes and sequences, and the same
    rows (the revision in ``alembic_version`` and whatever the migrations
    insert), as a database migrated from empty; and a migration to head
    finds nothing to do in it."""
    assert copy_template(migrated_templates, db_url), "no template to copy (pg_dump?)"
    copied = db.make_engine(db_url)
    url = sa.make_url(db_url)
    try:
        if url.get_backend_name() == "sqlite":
            migrated = db.make_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
            db.upgrade(migrated)
            with copied.connect() as a, migrated.connect() as b:
                assert _sqlite_shape(a) == _sqlite_shape(b)
            theirs = _facts(migrated)
            migrated.dispose()
        else:
            other = "m_" + url.query["application_name"]
            plain = url.set(query={}).render_as_string(hide_password=False)
            base = db.make_engine(plain)
            with base.begin() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{other}"'))
            migrated = db.make_engine(schema_url(plain, other))
            try:
                db.upgrade(migrated)
                schema = schema_of(db_url)
                with base.connect() as conn:
                    ours = _postgres_shape(conn, schema)
                    assert ours == _postgres_shape(conn, other) and len(ours) > 100
                theirs = _facts(migrated)
            finally:
                migrated.dispose()
                with base.begin() as conn:
                    conn.execute(sa.text(f'DROP SCHEMA "{other}" CASCADE'))
                base.dispose()
        assert theirs[0] is not None and _facts(copied) == theirs
        db.upgrade(copied)
        assert _facts(copied) == theirs
    finally:
        copied.dispose()
