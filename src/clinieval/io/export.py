"""Exports: a bundle, or CSV / Parquet table files, with pseudonymous rater ids.

Rater ids become ``r_`` + the first 16 hex digits of SHA-256(salt, id): the
same rater gets the same pseudonym in every export made with one salt, and
the mapping cannot be reversed without the salt. A snapshot whose metadata
says its rater ids are already pseudonymous keeps them, so re-exporting an
export is stable.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa

from clinieval.io import bundle
from clinieval.io.tables_io import write_table_files
from clinieval.snapshot import Snapshot

RATER_COLUMNS = {"raters": "rater_id", "ratings": "rater_id", "preferences": "rater_id"}
PSEUDONYMOUS = "pseudonymous"


def pseudonym(rater_id: str, salt: str) -> str:
    return "r_" + hashlib.sha256(f"{salt}\x1f{rater_id}".encode()).hexdigest()[:16]


def pseudonymise(snapshot: Snapshot, salt: str) -> Snapshot:
    """Replace every rater id by its salted pseudonym (idempotent per metadata)."""
    if snapshot.meta.get("rater_ids") == PSEUDONYMOUS:
        return snapshot
    tables = dict(snapshot.tables)
    for name, column in RATER_COLUMNS.items():
        data = tables[name]
        index = data.column_names.index(column)
        tables[name] = data.set_column(index, column, _map_ids(data.column(column), salt))
    return Snapshot(tables, {**snapshot.meta, "rater_ids": PSEUDONYMOUS})


def _map_ids(ids: pa.ChunkedArray, salt: str) -> pa.Array:
    """Pseudonymise through the dictionary: one hash per distinct id."""
    encoded = ids.combine_chunks().dictionary_encode()
    names = [pseudonym(v, salt) for v in encoded.dictionary.to_pylist()]
    return pa.DictionaryArray.from_arrays(encoded.indices, pa.array(names, pa.string())).cast(
        pa.string())


def export_snapshot(snapshot: Snapshot, out: Path, *, fmt: str = "bundle",
                    keep_rater_ids: bool = False, salt: str, overwrite: bool = False) -> dict:
    """Write ``snapshot`` to ``out`` as a bundle, csv or parquet tables."""
    if not keep_rater_ids:
        snapshot = pseudonymise(snapshot, salt)
    if fmt == "bundle":
        return bundle.write_bundle(snapshot, Path(out), overwrite=overwrite)
    written = write_table_files(snapshot, Path(out), fmt)
    return {"tables": {name: {"file": str(path), "rows": snapshot[name].num_rows}
                       for name, path in written.items()}}
