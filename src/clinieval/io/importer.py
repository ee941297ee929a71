"""Reading any supported source into a snapshot, and importing it.

Sources: a bundle folder, a folder of our CSV / JSONL / Parquet tables, or a
single foreign file (one of :data:`clinieval.io.foreign.FORMATS`). This is
the one place a format name is turned into a reader.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.io import bundle
from clinieval.io.foreign import FORMATS, sniff_format
from clinieval.io.foreign.records import keys_or, parse
from clinieval.io.tables_io import read_table_folder
from clinieval.io.validate import validate
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot
from clinieval.storage import db, lookup

SOURCE_FORMATS = ("auto", "bundle", "tables", *FORMATS)
"""Every value ``--format`` accepts."""


def detect_format(path: Path) -> str:
    """The format of ``path``: a bundle, a tables folder, or a sniffed foreign file."""
    if bundle.is_bundle(path):
        return "bundle"
    if path.is_dir():
        return "tables"
    if not path.exists():
        raise InputError(str(path), "no such file or folder")
    fmt = sniff_format(path)
    if fmt == "unknown":
        parsed = parse(path)  # raises the precise error for broken files
        raise InputError(parsed.source, "cannot tell the file's format from its first record",
                         expected="a MOOVE contribution export, an arena battle log or"
                         " HealthBench rubric examples", got=keys_or(parsed.first()))
    return fmt


def read_source(path: str | Path, *, fmt: str = "auto", rubric: Rubric | None = None,
                criterion_map: CriterionMap | None = None) -> tuple[Snapshot, dict[str, str]]:
    """Read ``path`` into a snapshot, returning it and each table's source file."""
    path = Path(path)
    if fmt not in SOURCE_FORMATS:
        raise InputError(str(path), f"unknown format {fmt!r}",
                         expected="one of " + ", ".join(SOURCE_FORMATS))
    fmt = detect_format(path) if fmt == "auto" else fmt
    rubric = rubric or load_rubric()
    if fmt == "bundle":
        snap = bundle.read_bundle(path)
        return snap, {name: str(path / f"{name}.parquet") for name in snap.tables}
    if fmt == "tables":
        if not path.is_dir():
            raise InputError(str(path), "--format tables needs a folder",
                             expected="a folder of <table>.csv/.jsonl/.parquet files")
        return read_table_folder(path, rubric=rubric, criterion_map=criterion_map or IDENTITY)
    options = {} if criterion_map is None else {"criterion_map": criterion_map}
    snap = FORMATS[fmt].read(path, rubric=rubric, **options)
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
