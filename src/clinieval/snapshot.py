"""An in-memory snapshot: Arrow tables following :mod:`clinieval.contract.tabular`, plus
the rubric, the criterion map used to harmonise it, and provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clinieval.contract import tabular
from clinieval.errors import InputError


@dataclass
class Snapshot:
    """Tables keyed by name (every name in :data:`clinieval.contract.tabular.BY_NAME`).

    ``meta`` carries provenance: the source description, the criterion map
    applied, and for synthetic snapshots the generator settings and the
    planted truths.
    """

    tables: dict[str, pa.Table]
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> pa.Table:
        return self.tables[name]

    def counts(self) -> dict[str, int]:
        return {t.name: self.tables[t.name].num_rows for t in tabular.ALL}

    @classmethod
    def from_tables(cls, raw: dict[str, pa.Table], meta: dict[str, Any] | None = None,
                    source: str = "<memory>") -> Snapshot:
        """Conform every table to its schema (missing tables become empty,
        missing optional columns become null) and return the snapshot."""
        tables = {t.name: conform(raw.get(t.name), t, source) for t in tabular.ALL}
        return cls(tables, dict(meta or {}))


DEFAULTS = {("ratings", "revision"): 0, ("preferences", "revision"): 0,
            ("answers", "sample_index"): 0}
"""Values a missing cell means: a rating without a revision is the first one
(so the database's uniqueness of (answer, rater, criterion, revision) holds)."""


def empty(table: tabular.Table) -> pa.Table:
    return table.schema.empty_table()


def conform(data: pa.Table | None, table: tabular.Table, source: str = "<memory>") -> pa.Table:
    """Cast ``data`` to ``table``'s schema: reorder columns, add absent
    optional columns as nulls, and raise :class:`InputError` naming the
    column when a required one is missing or a value cannot be cast."""
    if data is None:
        return empty(table)
    where = f"{source}:{table.name}" if not source.endswith(table.name) else source
    columns = []
    for fld in table.schema:
        if fld.name not in data.column_names:
            if fld.name in table.required:
                raise InputError(where, "required column is missing", field=fld.name,
                                 expected=f"a column named {fld.name!r}")
            columns.append(pa.nulls(data.num_rows, fld.type))
            continue
        columns.append(_cast(data.column(fld.name), fld, where))
    for index, fld in enumerate(table.schema):
        default = DEFAULTS.get((table.name, fld.name))
        if default is not None and columns[index].null_count:
            columns[index] = pc.fill_null(columns[index], pa.scalar(default, fld.type))
    return pa.Table.from_arrays(columns, schema=table.schema)


def _cast(column: pa.ChunkedArray, fld: pa.Field, where: str) -> pa.ChunkedArray:
    if column.type == fld.type:
        return column
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    try:
        return column.cast(fld.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        row, value = _first_uncastable(column, fld.type)
        raise InputError(where, "value has the wrong type", row=row, field=fld.name,
                         expected=_EXPECTED.get(fld.name, str(fld.type)), got=value) from None


_EXPECTED = {
    "score": "an integer score from -2 to 2",
    "risk_level": "an integer risk level from 1 to 5",
    "created_at": "an ISO 8601 timestamp with time zone",
}


def _first_uncastable(column: pa.ChunkedArray, target: pa.DataType) -> tuple[int, object]:
    """Locate the first value that does not cast (row numbers start at 1)."""
    offset = 0
    for chunk in column.chunks:
        try:
            chunk.cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i in range(len(chunk)):
                try:
                    chunk.slice(i, 1).cast(target, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    return offset + i + 1, chunk[i].as_py()
        offset += len(chunk)
    return 0, None


def current_ratings(ratings: pa.Table) -> pa.Table:
    """Keep the latest revision of each (answer, rater, criterion)."""
    return _latest_revisions(ratings, ["answer_id", "rater_id", "criterion_id"], "rating_id")


def current_preferences(preferences: pa.Table) -> pa.Table:
    """Keep the latest revision of each vote: (rater, case, answer A, answer B)."""
    return _latest_revisions(preferences, ["rater_id", "case_id", "answer_a_id", "answer_b_id"],
                             "preference_id")


def _latest_revisions(events: pa.Table, keys: list[str], order: str) -> pa.Table:
    """The row with the highest revision per ``keys``; a no-op without edits."""
    if "revision" not in events.column_names or events.num_rows == 0:
        return events
    if (pc.max(pc.fill_null(events.column("revision"), 0)).as_py() or 0) == 0:
        return events
    import polars as pl

    frame = pl.from_arrow(events).with_columns(pl.col("revision").fill_null(0))
    latest = frame.sort("revision").unique(subset=keys, keep="last", maintain_order=True)
    return latest.sort(order).to_arrow().cast(events.schema)
