"""Load the paper-scale synthetic snapshot into SQLite (and PostgreSQL when
reachable) and print rows per second, beside a straightforward per-row ORM-style
insert of the same ratings for comparison.

    python benchmarks/bench_import.py [--scale 1.0] [--postgres URL] [--baseline-rows N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from clinieval.io.bundle import write_bundle
from clinieval.io.importer import import_snapshot
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.synth import generate


def _timed(label: str, func):
    start = time.perf_counter()
    value = func()
    elapsed = time.perf_counter() - start
    print(f"{label:<48} {elapsed:8.2f} s")
    return value, elapsed


def _row_by_row(engine: sa.Engine, ratings: list[dict]) -> None:
    """The straightforward method: one INSERT statement per rating."""
    with engine.begin() as conn:
        for row in ratings:
            conn.execute(snapshot_tables.ratings.insert().values(**row))


def bench(url: str, bundle: Path, baseline_rows: int) -> None:
    engine = db.make_engine(url)
    db.upgrade(engine)
    (snap, sources), read_s = _timed(f"read + check bundle ({engine.dialect.name})",
                                     lambda: read_source(bundle))
    counts, load_s = _timed(f"validate + load ({engine.dialect.name})",
                            lambda: import_snapshot(engine, snap, sources=sources, replace=True))
    rows = sum(counts.values())
    total = read_s + load_s
    print(f"{engine.dialect.name}: {rows:,} rows in {total:.2f} s = {rows / total:,.0f} rows/s"
          f" (ratings {counts['ratings']:,})")
    sample = snap["ratings"].slice(0, baseline_rows).to_pylist()
    with engine.begin() as conn:
        conn.execute(snapshot_tables.ratings.delete())
    _, slow_s = _timed(f"row-by-row insert of {len(sample):,} ratings", lambda: _row_by_row(
        engine, sample))
    fast_rate, slow_rate = counts["ratings"] / load_s, len(sample) / slow_s
    print(f"{engine.dialect.name}: set-based {fast_rate:,.0f} ratings/s vs row-by-row"
          f" {slow_rate:,.0f} ratings/s: ratio {fast_rate / slow_rate:.1f}x")
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--postgres", default=os.environ.get("CLINIEVAL_TEST_POSTGRES_URL"))
    parser.add_argument("--baseline-rows", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "snap"
        snap, _ = _timed(f"generate synthetic snapshot (scale {args.scale:g})",
                         lambda: generate(seed=0, scale=args.scale))
        _timed("write bundle", lambda: write_bundle(snap, bundle))
        bench(f"sqlite:///{Path(tmp) / 'bench.db'}", bundle, args.baseline_rows)
        if args.postgres:
            try:
                bench(args.postgres, bundle, args.baseline_rows)
            except sa.exc.OperationalError as err:
                print(f"postgresql skipped: {err}")


if __name__ == "__main__":
    main()
