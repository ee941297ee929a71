"""Reading any supported source into a validated snapshot, and importing it.

Sources: a bundle folder, a folder of our CSV / JSONL / Parquet tables, or a
single foreign file (MOOVE-style contributions, Arena-style battles,
HealthBench-style rubric examples).
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.io import bundle
from clinieval.io.tables_io import read_table_folder
from clinieval.io.validate import validate
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot
from clinieval.storage import db, lookup

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


def import_snapshot(engine: sa.Engine, snapshot: Snapshot, *, sources: dict[str, str] | None = None,
                    replace: bool = False, progress=None) -> dict[str, int]:
    """Validate ``snapshot`` against itself and the stored rows it touches,
    then load it, all in one transaction. Criteria already stored with the
    same definition are reused; a changed definition is an error naming it."""
    with db.writing(engine) as conn:
        if replace:
            db.clear(conn)
        criteria = lookup.unchanged_or_new(conn, T.CRITERIA, snapshot["criteria"],
                                           where=(sources or {}).get("criteria"))
        snapshot = Snapshot({**snapshot.tables, "criteria": criteria}, snapshot.meta)
        validate(snapshot, sources=sources, existing=lookup.needed_keys(conn, snapshot))
        db.insert_snapshot(conn, snapshot, progress=progress)
    return snapshot.counts()
