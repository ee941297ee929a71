"""Readers for foreign evaluation formats.

* :func:`read_moove` — MOOVE-style contribution exports (one pairwise review
  per record, with per-answer criterion scores);
* :func:`read_arena` — Chatbot-Arena-style battle logs;
* :func:`read_healthbench` — HealthBench-style rubric examples;
* :func:`sniff_format` / :func:`read_foreign` — tell them apart and dispatch.

Each reader parses the whole file and validates everything specific to its
format before it builds anything, so a bad file yields an
:class:`~clinieval.errors.InputError` and no snapshot. Errors name the file,
the record, the field, what was expected and what was found. A record is named
by its contribution id when the file is keyed by id; otherwise ``row N`` is
line N of a JSON Lines file, or the N-th element of a JSON array. Checks across
tables (foreign keys, duplicate ids, score ranges) are left to the snapshot
validator.

Ids are stable: a case imported from prompt text is ``c_`` + a hash of the
text, an answer ``a_`` + a hash of (case, model, text), so importing the same
file twice gives the same ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pyarrow as pa

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.rubric import IDENTITY, MOOVE_MAP, CriterionMap, load_rubric, rubric_to_rows
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

__all__ = [
    "ARENA_WINNERS",
    "CASE_RULES",
    "FORMATS",
    "MOOVE_VOTES",
    "PLACEHOLDER_MODELS",
    "UNSPECIFIED",
    "case_id_for",
    "case_rules_table",
    "read_arena",
    "read_foreign",
    "read_healthbench",
    "read_moove",
    "sniff_format",
]

FORMATS = ("moove", "arena", "healthbench")

UNSPECIFIED = "Unspecified"
"""Specialty given to cases whose source names none."""

MOOVE_VOTES = {"1": "A", "2": "B", "12": "tie"}
"""MOOVE vote → preference choice (the first answer is answer A)."""

ARENA_WINNERS = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (bothbad)": "both_bad"}
"""Arena winner → preference choice."""

PLACEHOLDER_MODELS = ("unknown-first", "unknown-second")
"""Models that MOOVE answers are attributed to when the export does not say."""

HEALTHBENCH_PLACEHOLDER = "unknown-completion"

CASE_RULES = pa.schema([
    pa.field("case_id", pa.string(), nullable=False),
    pa.field("rule_id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("points", pa.int32(), nullable=False),
    pa.field("tags", pa.list_(pa.string())),
])
"""Case-level rubric rules (HealthBench items; CSEDB-style graded rules).

The snapshot table contract has no rules table, so :func:`read_healthbench`
puts the rules into ``snapshot.meta["case_rules"]`` as a list of plain dicts
with these columns. Being JSON, they survive a bundle's ``manifest.json``;
:func:`case_rules_table` turns them back into an Arrow table.
"""

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_SNIFF_BYTES = 1 << 20


def case_rules_table(rules: Iterable[dict]) -> pa.Table:
    """The :data:`CASE_RULES` Arrow table for ``meta["case_rules"]``."""
    return pa.Table.from_pylist(list(rules), schema=CASE_RULES)


# --------------------------------------------------------------------------
# Reading and parsing files


def _read_text(path: str | Path) -> tuple[str, str]:
    """(source name, text) of a UTF-8 file; empty and undecodable files are errors."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read the file ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            source,
            f"file is not valid UTF-8: byte 0x{data[exc.start]:02x} at byte offset"
            f" {exc.start} (line {line})",
            row=line, expected="UTF-8 encoded text",
            got=data[max(0, exc.start - 10): exc.start + 10],
        ) from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError(source, "file is empty",
                         expected="a JSON document or JSON Lines records")
    return source, text


@dataclass(frozen=True)
class _Parsed:
    source: str
    value: Any = None
    lines: tuple[tuple[int, Any], ...] | None = None
    """For JSON Lines: (line number, value) per non-blank line."""


def _lines(text: str) -> list[str]:
    """Physical lines. Not ``str.splitlines``: JSON text may hold a raw U+2028,
    which that would split on."""
    return text.split("\n")


def _looks_like_jsonl(path: str | Path, text: str) -> bool:
    """JSON Lines by suffix, or when the first non-blank line is a complete
    JSON object and another line follows."""
    if str(path).lower().endswith(_JSONL_SUFFIXES):
        return True
    first, _, rest = text.lstrip().partition("\n")
    if not rest.strip():
        return False
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def _json_error(source: str, exc: json.JSONDecodeError, text: str, line: int | None = None,
                ) -> InputError:
    row = exc.lineno if line is None else line
    where = f"line {row}, column {exc.colno}"
    if line is None:
        where += f" (character {exc.pos})"
    # JSON strings cannot span lines, so an unterminated one runs into the end.
    truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    reason = exc.msg + ("; the data ends before the value is complete (truncated?)"
                        if truncated else "")
    return InputError(source, f"invalid JSON at {where}: {reason}", row=row,
                      expected="valid JSON", got=text[max(0, exc.pos - 20): exc.pos + 20])


def _parse(path: str | Path) -> _Parsed:
    source, text = _read_text(path)
    if not _looks_like_jsonl(path, text):
        try:
            return _Parsed(source, value=json.loads(text))
        except json.JSONDecodeError as exc:
            raise _json_error(source, exc, text) from None
    lines = []
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            lines.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise _json_error(source, exc, line, line=number) from None
    return _Parsed(source, lines=tuple(lines))


def _records(parsed: _Parsed, *, what: str, is_record: Callable[[dict], bool],
             keyed: bool = False) -> list[_Rec]:
    """The records of a parsed file: JSON Lines, a JSON array, a single record,
    or (when ``keyed``) a JSON object keyed by record id."""
    source, value = parsed.source, parsed.value
    if parsed.lines is not None:
        items: list[tuple[int | str, Any]] = list(parsed.lines)
    elif isinstance(value, list):
        items = list(enumerate(value, start=1))
    elif isinstance(value, dict) and is_record(value):
        items = [(1, value)]
    elif isinstance(value, dict) and keyed:
        items = [(str(k), v) for k, v in value.items()]
    else:
        shape = "a JSON object keyed by record id, a JSON array" if keyed else "a JSON array"
        raise InputError(source, f"unexpected top-level {_jtype(value)}",
                         expected=f"{shape} or JSON Lines of {what}", got=_keys_or(value))
    if not items:
        raise InputError(source, "file contains no records", expected=f"at least one {what}")
    for row, item in items:
        if not isinstance(item, dict):
            raise InputError(source, f"record is a JSON {_jtype(item)}", row=row,
                             expected=f"a JSON object ({what})", got=item)
    return [_Rec(source, row, item) for row, item in items]


def _jtype(value: object) -> str:
    kinds = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
             (str, "string"), (list, "array"), (dict, "object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _keys_or(value: object) -> object:
    return sorted(value)[:8] if isinstance(value, dict) else value


# --------------------------------------------------------------------------
# Typed access to one record, with errors that say where


_MISSING = object()


@dataclass(frozen=True)
class _Rec:
    source: str
    row: int | str
    data: dict
    prefix: str = ""

    def fail(self, message: str, key: str | None = None, *, expected: str | None = None,
             got: object = None) -> NoReturn:
        name = None if key is None else self.prefix + key
        raise InputError(self.source, message, row=self.row, field=name, expected=expected,
                         got=got)

    def child(self, key: str, data: dict) -> _Rec:
        return _Rec(self.source, self.row, data, f"{self.prefix}{key}.")

    def raw(self, key: str, expected: str, *, required: bool = True) -> Any:
        value = _lookup(self.data, key)
        if value is _MISSING and required:
            self.fail("required field is missing", key, expected=expected)
        return None if value is _MISSING else value

    def typed(self, key: str, kind: type | tuple[type, ...], expected: str, *,
              required: bool = True, nullable: bool = False) -> Any:
        """The value of ``key`` if it has one of the types ``kind`` (a JSON
        boolean is not a number here). A missing key is an error when
        ``required``; null is an error when ``required and not nullable``."""
        value = self.raw(key, expected, required=required)
        if value is None:
            if required and not nullable:
                self.fail("value is null", key, expected=expected)
            return None
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
            self.fail(f"wrong type: JSON {_jtype(value)}", key, expected=expected, got=value)
        return value

    def text(self, key: str, what: str, *, required: bool = True, nullable: bool = False,
             empty: bool = False) -> str | None:
        value = self.typed(key, str, f"a string ({what})", required=required,
                           nullable=nullable)
        if value is not None and not empty and not value.strip():
            self.fail("value is an empty string", key, expected=f"a non-empty string ({what})",
                      got=value)
        return value

    def ident(self, key: str, what: str, *, required: bool = True) -> str | None:
        """A string or integer id, returned as a non-empty string."""
        value = self.typed(key, (str, int), f"a string or integer ({what})",
                           required=required)
        if value is None:
            return None
        if isinstance(value, str) and not value.strip():
            self.fail("value is an empty string", key, expected=f"a non-empty id ({what})",
                      got=value)
        return str(value)

    def obj(self, key: str, what: str, *, required: bool = True) -> dict | None:
        return self.typed(key, dict, f"a JSON object ({what})", required=required)

    def array(self, key: str, what: str, *, required: bool = True) -> list | None:
        return self.typed(key, list, f"a JSON array ({what})", required=required)

    def strings(self, key: str, what: str) -> list[str]:
        values = self.array(key, f"of strings: {what}", required=False) or []
        for i, value in enumerate(values):
            if not isinstance(value, str):
                self.fail(f"wrong type: JSON {_jtype(value)}", f"{key}[{i}]",
                          expected=f"a string ({what})", got=value)
        return values

    def timestamp(self, *keys: str) -> datetime | None:
        """The first of ``keys`` present: ISO 8601 text (UTC when no offset is
        given), unix seconds, or a MongoDB ``{"$date": ...}``."""
        for key in keys:
            value = _lookup(self.data, key)
            if value is not _MISSING and value is not None:
                return _to_datetime(self, key, value)
        return None


def _lookup(data: dict, path: str) -> Any:
    """``data[path]``, following dots through nested objects when ``path`` is
    not itself a key (so ``"meta.firstModel"`` works)."""
    if path in data:
        return data[path]
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_TIME_EXPECTED = "an ISO 8601 date-time, unix seconds, or {\"$date\": ...}"


def _to_datetime(rec: _Rec, key: str, value: Any) -> datetime:
    try:
        return _parse_time(value)
    except (ValueError, TypeError, OverflowError, OSError):
        rec.fail("not a valid date-time", key, expected=_TIME_EXPECTED, got=value)


def _parse_time(value: Any) -> datetime:
    if isinstance(value, dict) and "$date" in value:
        inner = value["$date"]
        if isinstance(inner, dict):
            inner = int(inner["$numberLong"])
        if isinstance(inner, str):
            return _parse_time(inner)
        value = inner / 1000  # MongoDB extended JSON counts milliseconds
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.strip())
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    raise TypeError(type(value).__name__)


# --------------------------------------------------------------------------
# Building the tables


def _hash(*parts: str, n: int) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:n]


def case_id_for(prompt: str) -> str:
    """The stable case id of a prompt text: ``c_`` + 12 hex digits of SHA-256."""
    return "c_" + _hash(prompt, n=12)


def _words(text: str | None) -> int | None:
    return None if text is None else len(text.split())


@dataclass
class _Builder:
    """Collects rows for the snapshot tables, deduplicating entities."""

    source: str
    cases: dict[str, dict] = field(default_factory=dict)
    models: dict[str, dict] = field(default_factory=dict)
    answers: dict[tuple, dict] = field(default_factory=dict)
    raters: dict[str, dict] = field(default_factory=dict)
    ratings: list[dict] = field(default_factory=list)
    preferences: list[dict] = field(default_factory=list)
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
        self.ratings.append({"rating_id": len(self.ratings) + 1, "revision": 0, **values})

    def preference(self, **values: Any) -> int:
        preference_id = len(self.preferences) + 1
        self.preferences.append({"preference_id": preference_id, **values})
        return preference_id

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
        return [f"{len(keys)} {what.split()[0]}(s) had conflicting values of"
                f" {what.split()[1]!r} across records; the first value was kept"
                f" (e.g. {sorted(keys)[0]!r})"
                for what, keys in sorted(self.conflicts.items())]

    def snapshot(self, rubric: Rubric, meta: dict) -> Snapshot:
        rows = {
            "cases": list(self.cases.values()),
            "models": list(self.models.values()),
            "answers": list(self.answers.values()),
            "raters": list(self.raters.values()),
            "criteria": rubric_to_rows(rubric),
            "ratings": self.ratings,
            "preferences": self.preferences,
        }
        tables = {name: _to_table(data, T.BY_NAME[name].schema) for name, data in rows.items()}
        meta = {**meta, "rubric": {"rubric_id": rubric.rubric_id, "version": rubric.version}}
        meta["notes"] = [*meta.get("notes", []), *self.notes()]
        return Snapshot.from_tables(tables, meta=meta, source=self.source)


def _to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    columns = {name: [row.get(name) for row in rows] for name in schema.names}
    return pa.Table.from_pydict(columns, schema=schema)


def _meta(fmt: str, source: str, cmap: CriterionMap, **extra: Any) -> dict:
    return {"format": fmt, "source": source, "criterion_map": cmap.describe(), "notes": [],
            **extra}


# --------------------------------------------------------------------------
# MOOVE-style contribution exports


class _CriterionScorer:
    """Maps source criterion names and scores onto the rubric via a criterion map."""

    def __init__(self, rubric: Rubric, cmap: CriterionMap) -> None:
        self.rubric, self.cmap = rubric, cmap
        lo, hi = cmap.source_scale
        levels = np.arange(lo, hi + 1)
        self._fast = {int(v): int(m) for v, m in zip(levels, cmap.rescale(levels), strict=True)
                      if not np.isnan(m)}
        self._ids: dict[str, str | None] = {}

    def criterion(self, rec: _Rec, name: str, key: str) -> str | None:
        if name not in self._ids:
            self._ids[name] = self._resolve(rec, name, key)
        return self._ids[name]

    def _resolve(self, rec: _Rec, name: str, key: str) -> str | None:
        try:
            criterion_id = self.cmap.resolve(self.rubric, name)
        except KeyError:
            known = ", ".join(self.rubric.ids)
            mapped = ", ".join(sorted(self.cmap.rename)) or "none"
            rec.fail(f"unknown criterion {name!r}", key, got=name, expected=(
                f"a criterion of rubric {self.rubric.rubric_id!r} ({known}) or a source name"
                f" in criterion map {self.cmap.name!r} ({mapped}); add it to the map's"
                " rename or drop"))
        if criterion_id is not None and criterion_id not in self.rubric.ids:
            rec.fail(f"criterion map {self.cmap.name!r} maps {name!r} to {criterion_id!r},"
                     f" which rubric {self.rubric.rubric_id!r} does not have", key,
                     expected=f"one of {', '.join(self.rubric.ids)}", got=criterion_id)
        return criterion_id

    def score(self, rec: _Rec, value: object, key: str) -> int:
        if type(value) is int and value in self._fast:
            return self._fast[value]
        return self.cmap.rescale_one(value, source=rec.source, row=rec.row,
                                     field=rec.prefix + key)


_VOTE_EXPECTED = ('"1" (first answer better), "2" (second better) or "12" (tie);'
                  " the integers 1, 2 and 12 are accepted too")


def _moove_vote(rec: _Rec) -> str:
    vote = rec.raw("vote", _VOTE_EXPECTED)
    key = str(vote) if type(vote) is int else vote.strip() if isinstance(vote, str) else None
    if key not in MOOVE_VOTES:
        rec.fail("unknown vote value", "vote", expected=_VOTE_EXPECTED, got=vote)
    return MOOVE_VOTES[key]


def _moove_scores(rec: _Rec, scorer: _CriterionScorer, side: str) -> tuple[dict[str, int], int]:
    """{rubric criterion: score} for one answer, and the number of null scores."""
    evaluations = rec.child("evaluations", rec.obj("evaluations", "per-answer scores"))
    raw = evaluations.obj(side, f"{{criterion: score}} for the {side} answer")
    found: dict[str, str] = {}
    scores: dict[str, int] = {}
    nulls = 0
    for name, value in raw.items():
        key = f"{side}.{name}"
        criterion_id = scorer.criterion(evaluations, name, key)
        if criterion_id is None:
            continue
        if criterion_id in found:
            evaluations.fail(
                f"source criteria {found[criterion_id]!r} and {name!r} both map to rubric"
                f" criterion {criterion_id!r}", side, got=[found[criterion_id], name],
                expected="at most one score per rubric criterion for each answer")
        found[criterion_id] = name
        if value is None:
            nulls += 1
            continue
        scores[criterion_id] = scorer.score(evaluations, value, key)
    return scores, nulls


def _record_id(rec: _Rec) -> str:
    """A MOOVE record's id: the key of a keyed export, else ``id``/``_id``
    (a MongoDB ``{"$oid": ...}`` is unwrapped), else the row number."""
    if isinstance(rec.row, str):
        return rec.row
    for key in ("id", "_id"):
        value = rec.data.get(key)
        if isinstance(value, dict) and isinstance(value.get("$oid"), str):
            return value["$oid"]
        if value is not None:
            return rec.ident(key, "the contribution id")
    return str(rec.row)


@dataclass
class _MooveModels:
    """Attributes answers to models, counting records without model identity."""

    fields: tuple[str, str]
    missing: int = 0

    def get(self, rec: _Rec) -> tuple[str, str]:
        names = []
        absent = False
        for path, placeholder in zip(self.fields, PLACEHOLDER_MODELS, strict=True):
            value = _lookup(rec.data, path)
            if value is _MISSING or value is None or value == "":
                absent = True
                names.append(placeholder)
            else:
                names.append(rec.ident(path, "the model that wrote this answer"))
        self.missing += absent
        return names[0], names[1]

    def note(self, total: int) -> str | None:
        if not self.missing:
            return None
        which = "none" if self.missing == total else f"{total - self.missing} of {total}"
        return (f"Model identity was absent: {which} of the records name the models in the"
                f" fields {self.fields[0]!r}/{self.fields[1]!r}, so {self.missing} record(s)"
                f" were attributed to the placeholder models {PLACEHOLDER_MODELS[0]!r} and"
                f" {PLACEHOLDER_MODELS[1]!r}. Model-level analyses (Bradley–Terry ranking,"
                " per-model failure rates, leaderboards) are not meaningful for these"
                " records; pass model_fields to name the fields that identify the models.")


def read_moove(path: str | Path, *, rubric: Rubric | None = None,
               criterion_map: CriterionMap = MOOVE_MAP,
               model_fields: tuple[str, str] = ("firstModel", "secondModel")) -> Snapshot:
    """Read a MOOVE-style contribution export (a JSON object keyed by
    contribution id, a JSON array, or JSON Lines), one pairwise review per
    record.

    Each distinct question text is a case; answers are deduplicated by (case,
    model, text); the first answer is answer A and is shown left; vote "1" /
    "2" / "12" becomes choice A / B / tie. Criterion scores (``evaluations.first``
    / ``.second``) go through ``criterion_map`` onto ``rubric`` (default: the
    bundled rubric) and are linked to the preference by ``review_id``. The
    models come from ``model_fields`` (dotted paths allowed); without them the
    answers go to :data:`PLACEHOLDER_MODELS` and ``meta["notes"]`` says so.
    """
    if len(model_fields) != 2 or not all(isinstance(f, str) and f for f in model_fields):
        raise ValueError(f"model_fields needs two field names, got {model_fields!r}")
    rubric = rubric or load_rubric()
    records = _records(_parse(path), what="contributions", keyed=True,
                       is_record=lambda d: "question" in d)
    out = _Builder(records[0].source)
    scorer = _CriterionScorer(rubric, criterion_map)
    models = _MooveModels(tuple(model_fields))
    seen: dict[str, int | str] = {}
    nulls = 0
    for rec in records:
        record_id = _record_id(rec)
        if record_id in seen:
            rec.fail(f"duplicate contribution id (also at {_where(seen[record_id])})",
                     "id", expected="a unique id per contribution", got=record_id)
        seen[record_id] = rec.row
        nulls += _moove_record(rec, out, scorer, models)
    notes = [n for n in (models.note(len(records)), _null_note(nulls),
                         _repeat_note(out.number_revisions())) if n]
    meta = _meta("moove", out.source, criterion_map, notes=notes,
                 model_fields=list(model_fields), record_ids=list(seen))
    return out.snapshot(rubric, meta)


def _where(row: int | str) -> str:
    return f"row {row}" if isinstance(row, int) else f"record {row!r}"


def _repeat_note(repeats: int) -> str | None:
    if not repeats:
        return None
    return (f"{repeats} rating(s) re-scored an answer that the same rater had scored in an"
            " earlier review; they are stored as later revisions of that rating (the audit"
            " uses the latest).")


def _null_note(nulls: int) -> str | None:
    if not nulls:
        return None
    return f"{nulls} criterion score(s) were null (not rated) and were skipped."


def _moove_record(rec: _Rec, out: _Builder, scorer: _CriterionScorer,
                  models: _MooveModels) -> int:
    question = rec.text("question", "the question text").strip()
    first = rec.text("firstAnswer", "the first answer's text", empty=True)
    second = rec.text("secondAnswer", "the second answer's text", empty=True)
    choice = _moove_vote(rec)
    user = rec.ident("user", "the rater")
    country = rec.text("country", "the rater's country", nullable=True, empty=True)
    organisation = rec.text("organization_name", "the rater's organisation", nullable=True,
                            empty=True)
    specialty = rec.text("specialty", "the question's specialty", required=False, empty=True)
    created = rec.timestamp("createdAt", "timestamp")
    scored = [_moove_scores(rec, scorer, side) for side in ("first", "second")]
    model_a, model_b = models.get(rec)

    case_id = out.case(case_id_for(question), prompt=question,
                       specialty=(specialty or "").strip() or UNSPECIFIED)
    answers = out.pair(case_id, (model_a, first), (model_b, second))
    out.rater(user, country=country or None, organisation=organisation or None)
    review = out.preference(case_id=case_id, answer_a_id=answers[0], answer_b_id=answers[1],
                            shown_left="A", choice=choice, rater_id=user, created_at=created)
    for answer_id, (scores, _) in zip(answers, scored, strict=True):
        for criterion_id, score in scores.items():
            out.rating(answer_id=answer_id, rater_id=user, criterion_id=criterion_id,
                       score=score, review_id=review, created_at=created)
    return sum(n for _, n in scored)


# --------------------------------------------------------------------------
# Arena-style battle logs


def _turns(rec: _Rec, key: str) -> list[tuple[str, str]] | None:
    """[(role, content)] of a conversation field, or None when absent."""
    turns = rec.array(key, "of {role, content} turns", required=False)
    if turns is None:
        return None
    if not turns:
        rec.fail("conversation is empty", key, expected="at least one turn", got=turns)
    out = []
    for item in _objects(rec, key, turns, "{role, content}"):
        out.append((item.text("role", "the speaker").strip(),
                    item.text("content", "the turn's text", empty=True)))
    return out


def _turn(rec: _Rec, key: str, turns: list[tuple[str, str]], role: str, last: bool) -> str:
    found = [content for who, content in turns if who == role]
    if not found:
        rec.fail(f"conversation has no {role!r} turn", key,
                 expected=f"a turn with role {role!r}", got=[who for who, _ in turns])
    return found[-1] if last else found[0]


def _arena_winner(rec: _Rec) -> str:
    expected = " / ".join(repr(w) for w in ARENA_WINNERS)
    winner = rec.raw("winner", expected)
    if not isinstance(winner, str) or winner.strip() not in ARENA_WINNERS:
        rec.fail("unknown winner", "winner", expected=expected, got=winner)
    return ARENA_WINNERS[winner.strip()]


def read_arena(path: str | Path, *, rubric: Rubric | None = None,
               criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """Read a Chatbot-Arena-style battle log (a JSON array or JSON Lines).

    Each battle becomes one preference: model_a's answer is answer A, shown
    left; winner model_a / model_b / tie / "tie (bothbad)" becomes A / B / tie
    / both_bad; ``judge`` is the rater and ``tstamp`` (unix seconds) the time.
    With conversations, the case is the first user turn (one case per distinct
    prompt text) and each answer the last assistant turn. Without them, the
    case is ``question_id`` (else ``battle-N``) and the answers carry no text.
    No ratings are produced; ``rubric`` only fills the criteria table.
    """
    rubric = rubric or load_rubric()
    records = _records(_parse(path), what="battles", is_record=lambda d: "model_a" in d)
    out = _Builder(records[0].source)
    multi_turn = sum(_arena_battle(rec, index, out)
                     for index, rec in enumerate(records, start=1))
    notes = []
    if multi_turn:
        notes.append(f"{multi_turn} battle(s) had several turns; only the first user turn"
                     " (the case prompt) and the last assistant turn (the answer) were kept.")
    return out.snapshot(rubric, _meta("arena", out.source, criterion_map, notes=notes))


def _arena_battle(rec: _Rec, index: int, out: _Builder) -> bool:
    """Add one battle; True when its conversations had more than one exchange."""
    model_a = rec.ident("model_a", "the model behind answer A")
    model_b = rec.ident("model_b", "the model behind answer B")
    choice = _arena_winner(rec)
    question_id = rec.ident("question_id", "the question id", required=False)
    judge = rec.ident("judge", "the rater", required=False)
    created = rec.timestamp("tstamp")
    language = rec.text("language", "the conversation's language", required=False,
                        empty=True) or None
    conversations = [_turns(rec, "conversation_a"), _turns(rec, "conversation_b")]
    if (conversations[0] is None) != (conversations[1] is None):
        missing = "conversation_a" if conversations[0] is None else "conversation_b"
        rec.fail("only one side has a conversation", missing,
                 expected="both conversation_a and conversation_b, or neither")
    if conversations[0] is None:
        case_id = out.case(question_id or f"battle-{index}", specialty=UNSPECIFIED,
                           language=language)
        answers = out.pair(case_id, (model_a, None), (model_b, None), f"battle-{index}")
        multi = False
    else:
        case_id, answers, multi = _arena_texts(rec, out, conversations, (model_a, model_b),
                                               language)
    out.rater(judge)
    out.preference(case_id=case_id, answer_a_id=answers[0], answer_b_id=answers[1],
                   shown_left="A", choice=choice, rater_id=judge, created_at=created)
    return multi


def _arena_texts(rec: _Rec, out: _Builder, conversations: list, models: tuple[str, str],
                 language: str | None) -> tuple[str, tuple[str, str], bool]:
    keys = ("conversation_a", "conversation_b")
    prompts = [_turn(rec, k, c, "user", last=False) for k, c in zip(keys, conversations,
                                                                     strict=True)]
    if prompts[0] != prompts[1]:
        rec.fail("the two conversations start with different user turns", keys[1],
                 expected=f"the same first user turn as conversation_a ({prompts[0]!r:.40})",
                 got=prompts[1])
    texts = [_turn(rec, k, c, "assistant", last=True) for k, c in zip(keys, conversations,
                                                                      strict=True)]
    prompt = prompts[0].strip()
    case_id = out.case(case_id_for(prompt), prompt=prompt, specialty=UNSPECIFIED,
                       language=language)
    answers = out.pair(case_id, (models[0], texts[0]), (models[1], texts[1]))
    multi = any(sum(who == "user" for who, _ in c) > 1 for c in conversations)
    return case_id, answers, multi


# --------------------------------------------------------------------------
# HealthBench-style rubric examples


def _render_prompt(turns: list[tuple[str, str]]) -> str:
    """The case prompt: the text of a lone user turn, else the conversation as
    ``role: content`` paragraphs."""
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1].strip()
    return "\n\n".join(f"{role}: {content.strip()}" for role, content in turns)


def _tag_value(tags: list[str], prefix: str) -> str | None:
    return next((t[len(prefix):].strip() for t in tags if t.startswith(prefix)), None)


def _rule_points(item: _Rec) -> int:
    expected = "a non-zero integer (negative for undesirable behaviour)"
    points = item.typed("points", (int, float), expected)
    if not float(points).is_integer() or points == 0 or abs(points) >= 2**31:
        item.fail("points must be a non-zero integer", "points", expected=expected, got=points)
    return int(points)


def _objects(rec: _Rec, key: str, items: list, shape: str) -> list[_Rec]:
    """Each element of a JSON array as a record, failing on one that is not an object."""
    out = []
    for i, raw in enumerate(items):
        if not isinstance(raw, dict):
            rec.fail(f"wrong type: JSON {_jtype(raw)}", f"{key}[{i}]",
                     expected=f"a JSON object {shape}", got=raw)
        out.append(rec.child(f"{key}[{i}]", raw))
    return out


def _rules(rec: _Rec, case_id: str) -> list[dict]:
    items = rec.array("rubrics", "of rubric items {criterion, points, tags}")
    if not items:
        rec.fail("rubric is empty", "rubrics", expected="at least one rubric item", got=items)
    rules = []
    for i, item in enumerate(_objects(rec, "rubrics", items, "{criterion, points, tags}")):
        rules.append({"case_id": case_id, "rule_id": f"{case_id}:{i + 1}",
                      "text": item.text("criterion", "what the rule checks"),
                      "points": _rule_points(item),
                      "tags": item.strings("tags", "the rule's tags")})
    return rules


def _completion(rec: _Rec) -> str | None:
    if isinstance(rec.data.get("completion"), list):
        turns = _turns(rec, "completion")
        return _turn(rec, "completion", turns, "assistant", last=True)
    return rec.text("completion", "the model's answer", required=False, empty=True)


def _reference(rec: _Rec) -> str | None:
    data = rec.obj("ideal_completions_data", "with an ideal_completion", required=False)
    if data is None:
        return None
    ideal = rec.child("ideal_completions_data", data)
    return ideal.text("ideal_completion", "the reference answer", required=False, empty=True)


def read_healthbench(path: str | Path, *, rubric: Rubric | None = None,
                     criterion_map: CriterionMap = IDENTITY,
                     model_field: str = "model") -> Snapshot:
    """Read HealthBench-style rubric examples (JSON Lines, or a JSON array).

    Each example is a case: id ``prompt_id``; prompt the text of a lone user
    turn, else the conversation as ``role: content`` paragraphs; specialty and
    category from the ``theme:`` tag (specialty "Unspecified" without one);
    subcategory from ``physician_agreed_category:``; reference answer from
    ``ideal_completions_data.ideal_completion``. Its rubric items become
    case rules with signed integer points in ``meta["case_rules"]`` (see
    :data:`CASE_RULES`). A ``completion`` becomes an answer by the model in
    ``model_field`` (else a placeholder, with a note).
    """
    rubric = rubric or load_rubric()
    records = _records(_parse(path), what="rubric examples",
                       is_record=lambda d: "rubrics" in d)
    out = _Builder(records[0].source)
    rules: list[dict] = []
    seen: dict[str, int | str] = {}
    placeholders = multi_turn = 0
    for rec in records:
        case_id = rec.ident("prompt_id", "the example id")
        if case_id in seen:
            rec.fail(f"duplicate prompt_id (also at {_where(seen[case_id])})", "prompt_id",
                     expected="a unique prompt_id per example", got=case_id)
        seen[case_id] = rec.row
        turns = _turns(rec, "prompt")
        if turns is None:
            rec.fail("required field is missing", "prompt",
                     expected="a JSON array of {role, content} turns")
        multi_turn += len(turns) > 1
        rules += _rules(rec, case_id)
        placeholders += _healthbench_case(rec, out, case_id, turns, model_field)
    notes = []
    if multi_turn:
        notes.append(f"{multi_turn} prompt(s) are conversations of several turns; the case"
                     " prompt holds them as 'role: content' paragraphs.")
    if placeholders:
        notes.append(f"{placeholders} completion(s) had no model in field {model_field!r} and"
                     f" were attributed to the placeholder model {HEALTHBENCH_PLACEHOLDER!r};"
                     " model-level analyses are not meaningful for them.")
    meta = _meta("healthbench", out.source, criterion_map, notes=notes, case_rules=rules)
    return out.snapshot(rubric, meta)


def _healthbench_case(rec: _Rec, out: _Builder, case_id: str, turns: list, model_field: str,
                      ) -> bool:
    """Add the case (and its completion); True when the completion's model is unknown."""
    tags = rec.strings("example_tags", "the example's tags")
    theme = _tag_value(tags, "theme:")
    prompt = _render_prompt(turns)
    reference = _reference(rec)
    completion = _completion(rec)
    model = rec.ident(model_field, "the model that wrote the completion", required=False)
    out.case(case_id, prompt=prompt, specialty=theme or UNSPECIFIED, category=theme,
             subcategory=_tag_value(tags, "physician_agreed_category:"),
             reference_answer=reference)
    if completion is None:
        return False
    out.answer(case_id, model or HEALTHBENCH_PLACEHOLDER, completion)
    return model is None


# --------------------------------------------------------------------------
# Telling formats apart


def _classify(record: object) -> str:
    if not isinstance(record, dict):
        return "unknown"
    if "rubrics" in record and "prompt" in record:
        return "healthbench"
    if "model_a" in record and "model_b" in record:
        return "arena"
    if "question" in record and ({"firstAnswer", "secondAnswer", "vote"} & record.keys()):
        return "moove"
    if record and all(isinstance(v, dict) for v in record.values()):
        return _classify(next(iter(record.values())))
    return "unknown"


def _first_value(text: str) -> object:
    """The first record in ``text``: the first element of an array, the first
    line's object, or the first value of an object keyed by id."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if text[pos:pos + 1] == "[":
        start = len(text) - len(text[pos + 1:].lstrip())
        return decoder.raw_decode(text, start)[0]
    try:
        return decoder.raw_decode(text, pos)[0]
    except json.JSONDecodeError:
        if text[pos:pos + 1] != "{":
            raise
    key_at = len(text) - len(text[pos + 1:].lstrip())
    _, colon = decoder.raw_decode(text, key_at)
    colon = len(text) - len(text[colon:].lstrip())
    if text[colon:colon + 1] != ":":
        raise json.JSONDecodeError("Expecting ':' delimiter", text, colon)
    value_at = len(text) - len(text[colon + 1:].lstrip())
    return {"_": decoder.raw_decode(text, value_at)[0]}


def sniff_format(path: str | Path) -> str:
    """Which reader fits: ``"moove"``, ``"arena"``, ``"healthbench"`` or
    ``"unknown"``, judged from the first record (reading only the first MiB
    when the first record fits in it)."""
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
        more = bool(handle.read(1))
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    try:
        return _classify(_first_value(text))
    except (json.JSONDecodeError, IndexError):
        if more:
            return _sniff_whole(path)
        return "unknown"


def _sniff_whole(path: str | Path) -> str:
    try:
        return _classify(_first_value(Path(path).read_text("utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, IndexError):
        return "unknown"


_READERS: dict[str, Callable[..., Snapshot]] = {
    "moove": read_moove,
    "arena": read_arena,
    "healthbench": read_healthbench,
}


def read_foreign(path: str | Path, fmt: str = "auto", **options: Any) -> Snapshot:
    """Read a foreign-format file with the reader for ``fmt`` ("auto" sniffs
    it); ``options`` go to that reader (``rubric``, ``criterion_map``, ...)."""
    if fmt == "auto":
        try:
            fmt = sniff_format(path)
        except OSError:
            _read_text(path)  # raises an InputError naming the file
            raise
        if fmt == "unknown":
            parsed = _parse(path)  # raises the precise error for broken files
            raise InputError(
                parsed.source, "cannot tell the file's format from its first record",
                expected="a MOOVE contribution export, an arena battle log or HealthBench"
                         " rubric examples", got=_keys_or(_first_parsed(parsed)))
    if fmt not in _READERS:
        raise ValueError(f"unknown format {fmt!r}; choose auto, {', '.join(FORMATS)}")
    return _READERS[fmt](path, **options)


def _first_parsed(parsed: _Parsed) -> object:
    if parsed.lines:
        return parsed.lines[0][1]
    value = parsed.value
    return value[0] if isinstance(value, list) and value else value
