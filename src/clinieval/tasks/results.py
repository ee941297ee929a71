"""Benchmark results in the database: written after a run is scored (one
transaction per run, replacing that run's earlier scoring), and read back
for the audit's benchmarks section, one row per (model, benchmark,
instance, sample) of each run's primary scorer.

When a model has several runs of one benchmark, the latest scored run is
the one read (a re-run with ``--no-cache`` replaces the earlier numbers;
the earlier rows stay stored).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa

from clinieval.catalogs import Benchmark as RegistryEntry
from clinieval.catalogs import Normalisation
from clinieval.storage.schema.benchmarks import benchmark_results, benchmark_runs


def write_run(engine: sa.Engine, run: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Store a scored run (``run``: a ``benchmark_runs`` row without
    ``scored_at``) and its results, replacing what the run had."""
    run = run | {"scored_at": datetime.now(UTC)}
    with engine.begin() as conn:
        conn.execute(benchmark_results.delete().where(benchmark_results.c.run_id == run["run_id"]))
        conn.execute(benchmark_runs.delete().where(benchmark_runs.c.run_id == run["run_id"]))
        conn.execute(benchmark_runs.insert(), [run])
        for start in range(0, len(rows), 500):
            conn.execute(benchmark_results.insert(), rows[start:start + 500])


def has_results(engine: sa.Engine) -> bool:
    inspector = sa.inspect(engine)
    if not inspector.has_table("benchmark_results"):
        return False
    with engine.connect() as conn:
        return conn.execute(sa.select(benchmark_results.c.run_id).limit(1)).first() is not None


def latest_runs(engine: sa.Engine) -> pd.DataFrame:
    """The latest scored run of each (benchmark, model)."""
    with engine.connect() as conn:
        runs = pd.DataFrame(conn.execute(sa.select(benchmark_runs)).mappings().all())
    if runs.empty:
        return runs
    runs = runs.sort_values("scored_at", kind="stable")
    return runs.drop_duplicates(["benchmark_id", "model_id"], keep="last").reset_index(drop=True)


def sample_results(engine: sa.Engine) -> tuple[pd.DataFrame, list[RegistryEntry]]:
    """Sample-level results of each latest run's primary scorer (columns
    ``model_id, benchmark_id, instance_id, sample_index, status, score``
    and the cost columns), and the runs' registry entries."""
    runs = latest_runs(engine)
    if runs.empty:
        return pd.DataFrame(), []
    r = benchmark_results
    parts = []
    with engine.connect() as conn:
        for run in runs.itertuples():
            query = sa.select(r.c.instance_id, r.c.sample_index, r.c.status, r.c.score,
                              r.c.input_tokens, r.c.output_tokens, r.c.cost_usd).where(
                r.c.run_id == run.run_id, r.c.scorer == run.primary_scorer)
            frame = pd.DataFrame(conn.execute(query).mappings().all(),
                                 columns=["instance_id", "sample_index", "status", "score",
                                          "input_tokens", "output_tokens", "cost_usd"])
            parts.append(frame.assign(model_id=run.model_id, benchmark_id=run.benchmark_id))
    entries = {}
    for run in runs.itertuples():
        entries[run.benchmark_id] = RegistryEntry(
            benchmark_id=run.benchmark_id, label=run.label or "", category=run.category,
            subcategory=run.subcategory, metric=run.metric,
            normalisation=Normalisation.model_validate(json.loads(run.normalisation)))
    return pd.concat(parts, ignore_index=True), list(entries.values())


def results_at(source: str) -> tuple[pd.DataFrame, list[RegistryEntry]] | None:
    """:func:`sample_results` of ``source`` when it names a database holding
    benchmark results, else None."""
    from clinieval.sources import DATABASE_URL, SQLITE_FILE
    from clinieval.storage import db
    from clinieval.storage.sqlite_read import sqlite_file_url

    if SQLITE_FILE.matches(source):
        source = sqlite_file_url(source)
    elif not DATABASE_URL.matches(source):
        return None
    engine = db.make_engine(source)
    try:
        return sample_results(engine) if has_results(engine) else None
    finally:
        engine.dispose()
