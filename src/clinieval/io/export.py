"""Exports: a bundle, or CSV / Parquet table files, with pseudonymous rater ids.

Rater ids become ``r_`` + the first 16 hex digits of SHA-256(salt, id): the
same rater gets the same pseudonym in every export made with one salt, and
the mapping cannot be reversed without the salt. Every id is hashed, also
one of the pseudonym form (``r_`` + 16 hex digits): the platform makes its
own rater ids in that form, so the form alone cannot tell a stored id from
an earlier export's pseudonym, and a snapshot's claim of pseudonymous ids
is not trusted either. One exception keeps re-exports stable: a snapshot
whose tables are, unchanged, those of a bundle that declared its ids
pseudonymous (its ``snapshot_sha256`` recomputed from the tables) keeps
ids of the pseudonym form, since exporting it reveals nothing that bundle
did not. A database that gained any rater, rating or vote since (every
platform account has a rater row), or a study's slice of it, no longer
matches and is hashed in full. Raw ids are also replaced wherever they
occur in the metadata (notes, provenance).

Text holding bidirectional controls (U+202A-202E, U+2066-2069; a comment
can hold one) is exported as written, and flagged: the manifest's
``bidi_controls`` (and the export's summary, for CSV and Parquet too) maps
each ``table.column`` holding any to its number of such values, so a reader
knows to display them isolated (``<bdi>``, ``dir="auto"``).

With ``drop_quasi_identifiers`` the export also blanks what could single a
rater out in combination: organisation, country and experience, free-text
comments, and the time of day of every timestamp.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clinieval.contract import tabular
from clinieval.contract.validate import BIDI_CONTROLS
from clinieval.errors import ConfigError, InputError
from clinieval.io import bundle
from clinieval.io.tables_io import write_table_files
from clinieval.settings import Settings
from clinieval.snapshot import Snapshot

EXPORT_FORMATS = ("bundle", "csv", "parquet")
RATER_COLUMNS = {"raters": "rater_id", "ratings": "rater_id", "preferences": "rater_id",
                 "adjudications": "rater_id"}
PSEUDONYMOUS = "pseudonymous"
PSEUDONYM = re.compile(r"r_[0-9a-f]{16}")
"""The form of a pseudonym, which is also the form of the platform's own rater ids."""
DEFAULT_SALT = Settings.model_fields["pseudonym_salt"].default
"""The salt in the source code: anyone can recompute pseudonyms made with it."""

QUASI_IDENTIFIERS = {"raters": ("country", "organisation", "experience_years"),
                     "ratings": ("comment",), "adjudications": ("reason",)}
"""Columns blanked by ``drop_quasi_identifiers`` (timestamps are rounded to the day)."""


def pseudonym(rater_id: str, salt: str) -> str:
    return "r_" + hashlib.sha256(f"{salt}\x1f{rater_id}".encode()).hexdigest()[:16]


def pseudonymise(snapshot: Snapshot, salt: str) -> Snapshot:
    """Replace every rater id by its salted pseudonym, in the tables and
    wherever it appears in the metadata (an unchanged pseudonymous bundle
    keeps its ids: see the module's docstring)."""
    mapping = _mapping(snapshot, salt)
    tables = dict(snapshot.tables)
    for name, column in RATER_COLUMNS.items():
        data = tables[name]
        index = data.column_names.index(column)
        tables[name] = data.set_column(index, column, _map_ids(data.column(column), mapping))
    meta = {**_scrub(snapshot.meta, mapping), "rater_ids": PSEUDONYMOUS}
    return Snapshot(tables, meta)


def _mapping(snapshot: Snapshot, salt: str) -> dict[str, str]:
    """Stored id -> pseudonym for every id in any rater column. An id of the
    pseudonym form is hashed too (the platform's stored ids have that form),
    unless the snapshot is an unchanged pseudonymous bundle, whose ids map
    to themselves."""
    ids = pa.chunked_array([snapshot[n].column(c).combine_chunks() for n, c in
                            RATER_COLUMNS.items()], pa.string())
    distinct = pc.unique(pc.drop_null(ids)).to_pylist()
    if _is_a_pseudonymous_bundle(snapshot, distinct):
        return {i: i for i in distinct}
    return {i: pseudonym(i, salt) for i in distinct}


def _is_a_pseudonymous_bundle(snapshot: Snapshot, ids: list[str]) -> bool:
    """Whether ``snapshot`` holds, unchanged, the tables of a bundle that
    declared its rater ids pseudonymous, all of them of the pseudonym form.

    The claim alone proves nothing (a platform database may carry it from an
    import and then gain raters of its own); the bundle's checksum of its
    whole content, recomputed here, ties the claim to exactly these tables."""
    claimed = snapshot.meta.get("snapshot_sha256")
    if snapshot.meta.get("rater_ids") != PSEUDONYMOUS or not isinstance(claimed, str):
        return False
    if not all(PSEUDONYM.fullmatch(i) for i in ids):
        return False
    return bundle.snapshot_content_checksum(snapshot) == claimed


def _map_ids(ids: pa.ChunkedArray, mapping: dict[str, str]) -> pa.Array:
    """Pseudonymise through the dictionary: one lookup per distinct id."""
    encoded = ids.combine_chunks().dictionary_encode()
    names = [mapping[v] for v in encoded.dictionary.to_pylist()]
    return pa.DictionaryArray.from_arrays(encoded.indices, pa.array(names, pa.string())).cast(
        pa.string())


def _scrub(meta: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """``meta`` with every raw rater id in its strings replaced by its pseudonym
    (a rater id may be an e-mail address quoted in a note)."""
    raw = sorted((i for i, p in mapping.items() if i != p), key=len, reverse=True)
    if not raw:
        return meta
    pattern = re.compile(r"(?<![\w@.+-])(?:" + "|".join(map(re.escape, raw)) + r")(?![\w@.+-])")
    if not pattern.search(json.dumps(meta, default=str, ensure_ascii=False)):
        return meta
    return _replace(meta, pattern, mapping)


def _replace(value: Any, pattern: re.Pattern, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: mapping[m.group(0)], value)
    if isinstance(value, dict):
        return {_replace(k, pattern, mapping): _replace(v, pattern, mapping)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v, pattern, mapping) for v in value]
    return value


def drop_quasi_identifiers(snapshot: Snapshot) -> Snapshot:
    """Blank :data:`QUASI_IDENTIFIERS` and round every timestamp down to its day."""
    tables = {}
    for table in tabular.ALL:
        data = snapshot[table.name]
        for fld in table.schema:
            column = data.column(fld.name)
            if fld.name in QUASI_IDENTIFIERS.get(table.name, ()):
                column = pa.nulls(data.num_rows, fld.type)
            elif pa.types.is_timestamp(fld.type):
                column = pc.floor_temporal(column, unit="day")
            else:
                continue
            data = data.set_column(data.column_names.index(fld.name), fld.name, column)
        tables[table.name] = data
    return Snapshot(tables, {**snapshot.meta, "quasi_identifiers": "dropped"})


def check_salt(salt: str, *, allow_default_salt: bool = False) -> None:
    """Refuse the public default salt unless explicitly allowed."""
    if salt == DEFAULT_SALT and not allow_default_salt:
        raise ConfigError(
            "setting CLINIEVAL_PSEUDONYM_SALT is the public default, so anyone could recompute"
            " the pseudonyms from raw rater ids; set a secret salt of your own, or pass"
            " --allow-default-salt to export with it anyway")


def export_snapshot(snapshot: Snapshot, out: Path, *, fmt: str = "bundle",
                    keep_rater_ids: bool = False, salt: str, allow_default_salt: bool = False,
                    quasi_identifiers: bool = True, overwrite: bool = False) -> dict:
    """Write ``snapshot`` to ``out`` as a bundle, csv or parquet tables; rater
    ids pseudonymised (unless ``keep_rater_ids``) and, without
    ``quasi_identifiers``, the columns of :data:`QUASI_IDENTIFIERS` blanked."""
    if fmt not in EXPORT_FORMATS:
        raise InputError(str(out), f"unknown export format {fmt!r}",
                         expected=" or ".join(EXPORT_FORMATS))
    if keep_rater_ids:
        snapshot = Snapshot(snapshot.tables, {**snapshot.meta, "rater_ids": "raw"})
    else:
        check_salt(salt, allow_default_salt=allow_default_salt)
        snapshot = pseudonymise(snapshot, salt)
    if not quasi_identifiers:
        snapshot = drop_quasi_identifiers(snapshot)
    flagged = bidi_controls(snapshot)
    snapshot = Snapshot(snapshot.tables, {k: v for k, v in snapshot.meta.items()
                                          if k != "bidi_controls"}
                        | ({"bidi_controls": flagged} if flagged else {}))
    if fmt == "bundle":
        return bundle.write_bundle(snapshot, Path(out), overwrite=overwrite)
    written = write_table_files(snapshot, Path(out), fmt)
    return {"tables": {name: {"file": str(path), "rows": snapshot[name].num_rows}
                       for name, path in written.items()}, "bidi_controls": flagged}


_BIDI = "[" + "".join(sorted(BIDI_CONTROLS)) + "]"


def bidi_controls(snapshot: Snapshot) -> dict[str, int]:
    """Each ``table.column`` whose text holds a bidirectional control, with
    the number of such values (the export's flag)."""
    found = {}
    for name, table in snapshot.tables.items():
        for field in table.schema:
            if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
                n = pc.sum(pc.match_substring_regex(table[field.name], _BIDI)).as_py() or 0
                if n:
                    found[f"{name}.{field.name}"] = n
    return found
