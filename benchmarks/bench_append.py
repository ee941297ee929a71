"""Append a few ratings to a paper-scale database and print how many stored
rows the validation read and how long the append took, beside what reading
every stored key (the former approach) costs on the same database.

    python benchmarks/bench_append.py [--scale 1.0] [--rows 1000] [--postgres URL]

The new ratings arrive without ids (as from a foreign export); the database
assigns them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.synth import generate
from clinieval.testing import CountingConnection, CountingCursor, later_revisions


def _all_keys(engine: sa.Engine) -> int:
    """What validating an append used to read: every stored key."""
    with engine.connect() as conn:
        return sum(len(conn.execute(sa.select(t.primary_key.columns.values()[0])).all())
                   for t in snapshot_tables.BY_NAME.values())


def _seconds(func) -> tuple[object, float]:
    start = time.perf_counter()
    value = func()
    return value, time.perf_counter() - start


def bench(url: str, snap, rows: int, **options) -> None:
    engine = db.make_engine(url, **options)
    db.upgrade(engine)
    _, load_s = _seconds(lambda: import_snapshot(engine, snap, replace=True))
    name = engine.dialect.name
    print(f"{name}: loaded {snap['ratings'].num_rows:,} ratings in {load_s:.1f} s")
    append = later_revisions(snap, rows)
    CountingCursor.fetched = 0
    _, append_s = _seconds(lambda: import_snapshot(engine, append))
    fetched = f"{CountingCursor.fetched:,} rows fetched" if options else "rows not counted"
    print(f"{name}: appended {rows:,} ratings in {append_s:.3f} s ({fetched})")
    keys, keys_s = _seconds(lambda: _all_keys(engine))
    print(f"{name}: reading every stored key instead: {keys:,} rows in {keys_s:.3f} s")
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--postgres", default=os.environ.get("CLINIEVAL_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    snap = generate(seed=0, scale=args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{Path(tmp) / 'append.db'}", snap, args.rows,
              connect_args={"factory": CountingConnection})
    if args.postgres:
        _in_scratch_schema(args.postgres, lambda url: bench(url, snap, args.rows))


def _in_scratch_schema(base: str, run) -> None:
    """Run on a fresh PostgreSQL schema, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    admin = db.make_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        run(f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}")
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


if __name__ == "__main__":
    main()
