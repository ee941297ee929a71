"""Building snapshot tables from foreign records, with stable ids.

Ids are stable: a case imported from prompt text is ``c_`` + a hash of the
text, an answer ``a_`` + a hash of (case, model, text), so importing the same
file twice gives the same ids.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from clinieval.contract import tabular
from clinieval.rubric import CriterionMap, rubric_to_rows
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

UNSPECIFIED = "Unspecified"
"""Specialty given to cases whose source names none."""

LOCAL_IDS = "local"
"""``meta["event_ids"]`` of a snapshot whose preference ids count from 1 within
its file: an import renumbers them after the stored ones."""


def _hash(*parts: str, n: int) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:n]


def case_id_for(prompt: str) -> str:
    """The stable case id of a prompt text: ``c_`` + 12 hex digits of SHA-256."""
    return "c_" + _hash(prompt, n=12)


def _words(text: str | None) -> int | None:
    return None if text is None else len(text.split())


@dataclass
class Builder:
    """Collects rows for the snapshot tables, deduplicating entities."""

    source: str
    cases: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    answers: dict[tuple, dict] = field(default_factory=dict)
    raters: dict[str, dict] = field(default_factory=dict)
    ratings: list[dict] = field(default_factory=list)
    preferences: list[dict] = field(default_factory=list)
    judgments: list[dict] = field(default_factory=list)
    conflicts: dict[str, set[str]] = field(default_factory=dict)

    def case(self, case_id: str, **values: Any) -> str:
        if "prompt" in values:
            values.setdefault("prompt_words", _words(values["prompt"]))
        self._merge("case", self.cases, case_id, {"case_id": case_id, **values})
        return case_id

    def model(self, model_id: str) -> str:
        self.models.setdefault(model_id, {"model_id": model_id, "display_name": model_id})
        return model_id

    def rater(self, rater_id: str | None, **values: Any) -> str | None:
        if rater_id is not None:
            self._merge("rater", self.raters, rater_id, {"rater_id": rater_id, **values})
        return rater_id

    def answer(self, case_id: str, model_id: str, text: str | None, *key: str,
               sample_index: int = 0) -> str:
        """The id of the answer (deduplicated by case, model, text and ``key``)."""
        ident = (case_id, model_id, text or "", *key, str(sample_index))
        row = self.answers.get(ident)
        if row is None:
            self.model(model_id)
            row = {"answer_id": "a_" + _hash(*ident, n=16), "case_id": case_id,
                   "model_id": model_id, "text": text, "sample_index": sample_index,
                   "length_chars": None if text is None else len(text)}
            self.answers[ident] = row
        return row["answer_id"]

    def pair(self, case_id: str, first: tuple[str, str | None], second: tuple[str, str | None],
             *key: str) -> tuple[str, str]:
        """Answer ids for the two sides of a comparison; when both sides are the
        same model with the same text, the second is kept as a separate sample
        so that a preference never compares an answer with itself."""
        a = self.answer(case_id, *first, *key)
        b = self.answer(case_id, *second, *key)
        if a == b:
            b = self.answer(case_id, *second, *key, sample_index=1)
        return a, b

    def rating(self, **values: Any) -> None:
        """A rating without id: the database assigns one when it is stored."""
        self.ratings.append({"rating_id": None, "revision": 0, **values})

    def preference(self, **values: Any) -> int:
        """A preference numbered within the file (ratings of its review point at
        it through ``review_id``); the import moves these numbers past the
        stored ids (see ``meta["event_ids"]``)."""
        preference_id = len(self.preferences) + 1
        self.preferences.append({"preference_id": preference_id, **values})
        return preference_id

    def judgment(self, **values: Any) -> None:
        """An automated judgment without id: the database assigns one when it is stored."""
        self.judgments.append({"judgment_id": None, **values})

    def _merge(self, kind: str, rows: dict[str, dict], key: str, values: dict) -> None:
        """Add a row; a later record fills fields left empty, and a conflicting
        value is kept as first seen and reported in the notes."""
        row = rows.setdefault(key, values)
        for name, value in values.items():
            old = row.get(name)
            if old is None or old == UNSPECIFIED and value is not None:
                row[name] = value
            elif value is not None and value != UNSPECIFIED and value != old:
                self.conflicts.setdefault(f"{kind} {name}", set()).add(key)

    def number_revisions(self) -> int:
        """Give repeat scores of one (answer, rater, criterion) increasing
        revisions, in time order when every repeat has a timestamp, else in
        file order; returns how many repeats there were.

        An answer shown again to the same rater in a later review is scored
        again; as separate revision-0 ratings it would count the rater twice,
        so the later score is stored as the rater's revision (the audit uses
        the latest; the earlier one stays as history)."""
        groups: dict[tuple, list[dict]] = {}
        for row in self.ratings:
            key = (row["answer_id"], row["rater_id"], row["criterion_id"])
            groups.setdefault(key, []).append(row)
        repeats = 0
        for rows in groups.values():
            if len(rows) == 1:
                continue
            if all(row.get("created_at") for row in rows):
                rows.sort(key=lambda row: row["created_at"])
            for revision, row in enumerate(rows):
                row["revision"] = revision
            repeats += len(rows) - 1
        return repeats

    def notes(self) -> list[str]:
        """One note per conflicting field. A rater is never named: notes travel
        into exported manifests, and a rater id may be an e-mail address."""
        notes = []
        for what, keys in sorted(self.conflicts.items()):
            kind, name = what.split()
            example = "" if kind == "rater" else f" (e.g. {sorted(keys)[0]!r})"
            notes.append(f"{len(keys)} {kind}(s) had conflicting values of {name!r} across"
                         f" records; the first value was kept{example}")
        return notes

    def snapshot(self, rubric: Rubric, meta: dict) -> Snapshot:
        rows = {
            "cases": list(self.cases.values()),
            "models": list(self.models.values()),
            "answers": list(self.answers.values()),
            "raters": list(self.raters.values()),
            "criteria": rubric_to_rows(rubric),
            "ratings": self.ratings,
            "preferences": self.preferences,
            "judgments": self.judgments,
        }
        tables = {name: _to_table(data, tabular.BY_NAME[name].schema)
                  for name, data in rows.items()}
        meta = {**meta, "rubric": {"rubric_id": rubric.rubric_id, "version": rubric.version},
                "event_ids": LOCAL_IDS}
        meta["notes"] = [*meta.get("notes", []), *self.notes()]
        return Snapshot.from_tables(tables, meta=meta, source=self.source)


def _to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.Table.from_pydict(columns, schema=schema)


def source_meta(fmt: str, source: str, cmap: CriterionMap, **extra: Any) -> dict:
    return {"format": fmt, "source": source, "criterion_map": cmap.describe(), "notes": [],
            **extra}
