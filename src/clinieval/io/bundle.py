"""Snapshot bundles: a folder of Parquet files plus ``manifest.json``.

The manifest carries the schema version, row counts, a SHA-256 of every
file's bytes (integrity) and of every table's canonical content (identity
across re-encodings), the rubric, the criterion map and the provenance
(generator settings and planted truths for synthetic snapshots).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clinieval import __version__
from clinieval.contract import tabular
from clinieval.contract.validate import check_types
from clinieval.errors import InputError, from_validation
from clinieval.io.jsontext import loads, read_bytes, read_text
from clinieval.snapshot import Snapshot, conform

MANIFEST = "manifest.json"
FORMAT = "clinieval-bundle"


def is_bundle(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).exists()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def content_sha256(data: pa.Table, key: str) -> str:
    """SHA-256 of a table's rows in key order, independent of file encoding,
    chunking and compression (Arrow IPC stream of the sorted table)."""
    keys = data.column(key)
    if not _is_sorted(keys):
        data = data.take(pc.sort_indices(keys))
    data = _canonical(data)
    digest = _Digest()
    with pa.ipc.new_stream(pa.PythonFile(digest, mode="w"), data.schema) as writer:
        for batch in data.combine_chunks().to_batches(1 << 20):
            writer.write_batch(batch)
    return digest.sha256.hexdigest()


class _Digest:
    """A write-only file that hashes what is written to it: the IPC stream is
    hashed piece by piece as the writer produces it, never held whole (a
    buffer of the whole stream costs more in fresh pages than the hashing)."""

    closed = False

    def __init__(self) -> None:
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _canonical(data: pa.Table) -> pa.Table:
    """Replace each nullable column by its validity and its values with nulls
    filled, so bytes hidden under null slots cannot change the hash."""
    columns, names = [], []
    for name, column in zip(data.column_names, data.columns, strict=True):
        if column.null_count:
            columns.append(pc.is_valid(column))
            names.append(f"{name}.valid")
            column = pc.fill_null(column, _zero(column.type))
        columns.append(column)
        names.append(name)
    return pa.table(columns, names=names)


def _zero(kind: pa.DataType) -> pa.Scalar:
    if pa.types.is_string(kind):
        return pa.scalar("", kind)
    if pa.types.is_boolean(kind):
        return pa.scalar(False, kind)
    if pa.types.is_timestamp(kind):
        return pa.scalar(0, pa.int64()).cast(kind)
    return pa.scalar(0, kind)


def _is_sorted(keys: pa.ChunkedArray) -> bool:
    if len(keys) < 2:
        return True
    if pa.types.is_integer(keys.type):
        values = keys.to_numpy()
        return bool(np.all(values[1:] > values[:-1]))
    return False


def snapshot_checksum(table_checksums: dict[str, str]) -> str:
    """One SHA-256 naming the whole snapshot's content."""
    text = "\n".join(f"{name}:{table_checksums[name]}" for name in sorted(table_checksums))
    return hashlib.sha256(text.encode()).hexdigest()


def write_bundle(snapshot: Snapshot, out: Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Write ``snapshot`` as a bundle at ``out`` and return its manifest.

    Files are written into a temporary sibling folder and moved into place
    at the end, so an interrupted write leaves no half bundle behind.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise InputError(str(out), "folder exists and is not empty; pass overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        manifest = _write_files(snapshot, staging)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return manifest


def written_tables(snapshot: Snapshot) -> list[tabular.Table]:
    """The tables a bundle of ``snapshot`` holds: every table, an optional one
    only when it has rows (:attr:`~clinieval.contract.tabular.Table.optional`)."""
    return [t for t in tabular.ALL if not t.optional or snapshot[t.name].num_rows]


def snapshot_content_checksum(snapshot: Snapshot) -> str:
    """The ``snapshot_sha256`` a bundle of ``snapshot`` carries, from its content."""
    return snapshot_checksum({t.name: content_sha256(snapshot[t.name], t.key)
                              for t in written_tables(snapshot)})


def _write_files(snapshot: Snapshot, folder: Path) -> dict[str, Any]:
    entries = {}
    for table in written_tables(snapshot):
        data = snapshot[table.name]
        path = folder / f"{table.name}.parquet"
        pq.write_table(data, path, compression="zstd", row_group_size=1 << 20)
        entries[table.name] = {
            "file": path.name,
            "rows": data.num_rows,
            "sha256": file_sha256(path),
            "content_sha256": content_sha256(data, table.key),
        }
    manifest = {
        **{k: v for k, v in snapshot.meta.items() if k not in _RESERVED},
        **_rubric_entries(snapshot),
        "format": FORMAT,
        "schema_version": tabular.SCHEMA_VERSION,
        "clinieval_version": __version__,
        "snapshot_sha256": snapshot_checksum({k: v["content_sha256"] for k, v in entries.items()}),
        "tables": entries,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return manifest


def _rubric_entries(snapshot: Snapshot) -> dict[str, Any]:
    """The full rubric (from the criteria table) and the criterion map used."""
    from clinieval.rubric import IDENTITY, rubric_from_rows, rubric_to_dict

    entries = {"criterion_map": snapshot.meta.get("criterion_map") or IDENTITY.describe()}
    rows = snapshot["criteria"].to_pylist()
    if rows:
        entries["rubric"] = rubric_to_dict(rubric_from_rows(rows, snapshot.meta.get("rubric")))
    return entries


_RESERVED = {"format", "schema_version", "clinieval_version", "snapshot_sha256", "tables"}


MANIFEST_MAX_BYTES = 256 << 20
"""Largest manifest read; provenance and record ids of a big export fit well within."""

_HEX64 = r"^[0-9a-f]{64}$"


class TableEntry(BaseModel):
    """One table of a bundle: a plain file name inside the bundle folder, its
    row count and two SHA-256 checksums (file bytes; canonical content)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    file: str = Field(pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$", max_length=255)
    rows: int = Field(ge=0)
    sha256: str = Field(pattern=_HEX64)
    content_sha256: str = Field(pattern=_HEX64)


class Manifest(BaseModel):
    """The structure of ``manifest.json``; provenance keys beyond these are kept."""

    model_config = ConfigDict(extra="allow", strict=True)

    format: Literal["clinieval-bundle"]
    schema_version: int = Field(ge=1, le=tabular.SCHEMA_VERSION)
    clinieval_version: str | None = None
    snapshot_sha256: str = Field(pattern=_HEX64)
    tables: dict[Literal[tuple(tabular.BY_NAME)], TableEntry]  # type: ignore[valid-type]
    notes: list[str] = Field(default_factory=list)
    rater_ids: str | None = None


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the bundle at ``folder``, checked against :class:`Manifest`
    before any table file is touched."""
    path = Path(folder) / MANIFEST
    if path.is_symlink():
        raise InputError(str(path), "manifest is a symbolic link", expected="a regular file")
    source, text = read_text(path, limit=MANIFEST_MAX_BYTES)
    raw = loads(text, source)
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as err:
        raise from_validation(source, err, "manifest does not fit the bundle format") from None
    return manifest.model_dump()


def table_path(folder: Path, entry: dict) -> Path:
    """The file of a manifest entry, refused unless it is a regular file
    directly inside ``folder`` (no links, devices or paths out of the bundle)."""
    path = Path(folder) / entry["file"]
    if path.is_symlink():
        raise InputError(str(path), "file listed in the manifest is a symbolic link",
                         expected="a regular file inside the bundle folder")
    if not path.is_file():
        what = "missing" if not path.exists() else "not a regular file"
        raise InputError(str(path), f"file listed in the manifest is {what}",
                         expected="a regular file inside the bundle folder")
    if path.resolve().parent != Path(folder).resolve():
        raise InputError(str(path), "file listed in the manifest is outside the bundle",
                         expected="a regular file inside the bundle folder")
    return path


def read_bundle(folder: Path, *, verify: bool = True) -> Snapshot:
    """Read a bundle. With ``verify``, every file's SHA-256, every table's
    content checksum and the snapshot checksum are compared with the manifest."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    tables = {}
    for name, entry in manifest["tables"].items():
        path = table_path(folder, entry)
        stored = _read_entry(path, entry, verify)
        check_types(stored, tabular.BY_NAME[name], str(path))
        data = conform(stored, tabular.BY_NAME[name], str(path))
        # A bundle written before a column was added was hashed without it.
        hashed = data.select([c for c in data.column_names if c in stored.column_names])
        if verify and content_sha256(hashed, tabular.BY_NAME[name].key) != entry["content_sha256"]:
            raise InputError(str(path), f"table {name!r} does not match its content_sha256"
                             " in the manifest; the bundle is corrupt or was edited")
        tables[name] = data
    if verify:
        verify_snapshot(folder, manifest)
    meta = {k: v for k, v in manifest.items() if k not in _RESERVED - {"snapshot_sha256"}}
    return Snapshot.from_tables(tables, meta)


def verify_snapshot(folder: Path, manifest: dict) -> None:
    """The manifest's snapshot checksum must match its tables' content checksums."""
    found = snapshot_checksum({k: v["content_sha256"] for k, v in manifest["tables"].items()})
    if found != manifest["snapshot_sha256"]:
        raise InputError(str(folder / MANIFEST), "snapshot_sha256 does not match the tables'"
                         " content checksums; the bundle is corrupt or was edited",
                         field="snapshot_sha256")


def verified_bytes(path: Path, entry: dict) -> bytes:
    """The bytes of a table file, refused unless their SHA-256 is the manifest's."""
    raw = read_bytes(path)
    if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
        raise InputError(str(path), "file does not match the SHA-256 in the manifest;"
                         " the bundle is corrupt or was edited")
    return raw


def _read_parquet(raw: bytes) -> pa.Table:
    """A Parquet file's table, decoded on this thread: a hostile file's error
    then leaves no pool thread still decoding when the command exits (Arrow's
    worker alive at exit aborts the process after the error is printed).

    Read as one file rather than through ``pq.read_table``'s dataset layer,
    which imports ``pyarrow.dataset`` (and pandas with it) and splits each
    column into chunks. A file that does not read so, that does not validate
    (text that is not UTF-8, say) or whose column names the dataset layer
    refuses (a name twice, or one of the names it adds to a scan, all
    starting ``__``) goes through ``pq.read_table`` again: what it refuses
    stays refused, with its error word for word (chunk numbers included)."""
    try:
        file = pq.ParquetFile(pa.BufferReader(raw), pre_buffer=False)
        # Row group by row group: only that path checks each column chunk's
        # type against the schema, as the dataset layer does (``read`` took a
        # chunk whose footer says BOOLEAN in an INT32 column; pyarrow 26).
        groups = [file.read_row_group(g, use_threads=False) for g in range(file.num_row_groups)]
        data = pa.concat_tables(groups) if len(groups) > 1 else (
            groups[0] if groups else file.read(use_threads=False))
        names = data.column_names
        if len(set(names)) == len(names) and not any(n.startswith("__") for n in names):
            data.validate(full=True)
            return data
    except (pa.ArrowException, OSError, UnicodeDecodeError):
        pass
    data = pq.read_table(pa.BufferReader(raw), use_threads=False, pre_buffer=False)
    data.validate(full=True)
    return data


def _read_entry(path: Path, entry: dict, verify: bool) -> pa.Table:
    raw = verified_bytes(path, entry) if verify else read_bytes(path)
    try:
        data = _read_parquet(raw)  # validated (full: UTF-8 text included)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:  # a column path not UTF-8
        raise InputError(str(path), f"not a readable Parquet file: {err}") from None
    if data.num_rows != entry["rows"]:
        raise InputError(str(path), "row count differs from the manifest",
                         expected=str(entry["rows"]), got=data.num_rows)
    return data
