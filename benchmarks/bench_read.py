"""Time reading a snapshot from a database: the column-wise read of
``clinieval.storage.db.read_snapshot`` beside the former row-by-row read
(SQLAlchemy rows collected into Python lists), alternating, each run twice,
and check that both give the same tables.

    python benchmarks/bench_read.py DATABASE_URL [--runs 2]

Make a paper-scale database with `clinieval synth --out snap --scale 1` and
`clinieval import snap --database-url sqlite:///paper.db`.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables


def row_by_row(engine: sa.Engine) -> Snapshot:
    """The former read (as of revision 0001): SQLAlchemy rows fetched in
    batches and gathered into Python lists, column by column."""
    with engine.connect() as conn:
        raw = {t.name: _rows_table(conn, t) for t in tabular.ALL}
    return Snapshot.from_tables(raw)


def _rows_table(conn: sa.Connection, table: tabular.Table) -> pa.Table:
    sa_table = snapshot_tables.BY_NAME[table.name]
    order = [sa_table.c[c] for c in ("position", table.key) if c in sa_table.c]
    result = conn.execute(sa.select(*[sa_table.c[c] for c in table.columns]).order_by(*order))
    columns: dict[str, list] = {c: [] for c in table.columns}
    while chunk := result.fetchmany(50_000):
        for name, values in zip(table.columns, zip(*chunk, strict=True), strict=True):
            columns[name].extend(values)
    return pa.table({c: pa.array(v, type=table.schema.field(c).type) for c, v in columns.items()},
                    schema=table.schema)


def _timed(label: str, read, url: str) -> Snapshot:
    engine = db.make_engine(url)
    start = time.perf_counter()
    snap = read(engine)
    print(f"{label:<28} {time.perf_counter() - start:6.2f} s"
          f"  ({snap['ratings'].num_rows:,} ratings)")
    engine.dispose()
    return snap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        before = _timed(f"row by row, run {run}", row_by_row, args.url)
        after = _timed(f"column-wise, run {run}", db.read_snapshot, args.url)
    same = all(before[t.name].equals(after[t.name]) for t in tabular.ALL)
    print("same tables:", same)


if __name__ == "__main__":
    main()
