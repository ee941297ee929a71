"""Reading any supported source into a validated snapshot, and importing it.

Sources: a bundle folder, a folder of our CSV / JSONL / Parquet tables, or a
single foreign file (MOOVE-style contributions, Arena-style battles,
HealthBench-style rubric examples).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.io import bundle
from clinieval.io.tables_io import read_table_folder
from clinieval.io.validate import validate
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot
from clinieval.storage import db, sqltables

FORMATS = ("auto", "bundle", "tables", "moove", "arena", "healthbench")


def detect_format(path: Path) -> str:
    if bundle.is_bundle(path):
        return "bundle"
    if path.is_dir():
        return "tables"
    if not path.exists():
        raise InputError(str(path), "no such file or folder")
    return "foreign"


def read_source(path: str | Path, *, fmt: str = "auto", rubric: Rubric | None = None,
                criterion_map: CriterionMap | None = None) -> tuple[Snapshot, dict[str, str]]:
    """Read ``path`` into a snapshot, returning it and each table's source file."""
    path = Path(path)
    fmt = detect_format(path) if fmt == "auto" else fmt
    rubric = rubric or load_rubric()
    if fmt == "bundle":
        snap = bundle.read_bundle(path)
        return snap, {name: str(path / f"{name}.parquet") for name in snap.tables}
    if fmt == "tables":
        return read_table_folder(path, rubric=rubric, criterion_map=criterion_map or IDENTITY)
    from clinieval.io.formats import read_foreign

    kwargs = {"rubric": rubric}
    if criterion_map is not None:
        kwargs["criterion_map"] = criterion_map
    snap = read_foreign(path, fmt="auto" if fmt == "foreign" else fmt, **kwargs)
    return snap, {name: str(path) for name in snap.tables}


def stored_keys(conn: sa.Connection) -> dict[str, pa.Array]:
    """Keys already in the database, for validating an append."""
    keys: dict[str, pa.Array] = {}
    for name, table in sqltables.BY_NAME.items():
        key = table.primary_key.columns.values()[0]
        values = conn.execute(sa.select(key)).scalars().all()
        if values:
            keys[name] = pa.array(values)
    rows = conn.execute(sa.select(sqltables.answers.c.answer_id, sqltables.answers.c.case_id)).all()
    if rows:
        keys["answer_cases"] = pa.array([f"{a}\x1f{c}" for a, c in rows])
    return keys


def import_snapshot(engine: sa.Engine, snapshot: Snapshot, *, sources: dict[str, str] | None = None,
                    replace: bool = False, progress=None) -> dict[str, int]:
    """Validate ``snapshot`` against itself and the stored rows, then load it
    in one transaction. Criteria already stored are reused, not re-inserted."""
    with engine.connect() as conn:
        existing = {} if replace else stored_keys(conn)
    snapshot = _without_stored_criteria(snapshot, existing)
    validate(snapshot, sources=sources, existing=existing)
    return db.load_snapshot(engine, snapshot, replace=replace, progress=progress)


def _without_stored_criteria(snapshot: Snapshot, existing: dict[str, pa.Array]) -> Snapshot:
    stored = existing.get("criteria")
    if stored is None:
        return snapshot
    import pyarrow.compute as pc

    criteria = snapshot["criteria"]
    fresh = criteria.filter(pc.invert(pc.is_in(criteria.column("criterion_id"), value_set=stored)))
    return Snapshot({**snapshot.tables, "criteria": fresh}, snapshot.meta)
