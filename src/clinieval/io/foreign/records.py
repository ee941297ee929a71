"""Parsed foreign files as records with typed, located access.

A record is named by its id when the file is keyed by id; otherwise ``row N``
is line N of a JSON Lines file, or the N-th element of a JSON array. Every
accessor fails with an :class:`~clinieval.errors.InputError` naming the file,
the record, the field, what was expected and what was found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from clinieval.errors import InputError
from clinieval.io.jsontext import json_lines, loads, looks_like_jsonl, read_text


@dataclass(frozen=True)
class Parsed:
    """A parsed file: one JSON ``value``, or ``lines`` of (line number, value)."""

    source: str
    value: Any = None
    lines: tuple[tuple[int, Any], ...] | None = None

    def first(self) -> object:
        """The first record, for messages about an unrecognised file."""
        if self.lines:
            return self.lines[0][1]
        return self.value[0] if isinstance(self.value, list) and self.value else self.value


def parse(path: str | Path) -> Parsed:
    """Read and parse a JSON document or a JSON Lines file."""
    source, text = read_text(path)
    if looks_like_jsonl(path, text):
        return Parsed(source, lines=tuple(json_lines(text, source)))
    return Parsed(source, value=loads(text, source))


def split_records(parsed: Parsed, *, what: str, is_record: Callable[[dict], bool],
            keyed: bool = False) -> list[Record]:
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
        raise InputError(source, f"unexpected top-level {jtype(value)}",
                         expected=f"{shape} or JSON Lines of {what}", got=keys_or(value))
    if not items:
        raise InputError(source, "file contains no records", expected=f"at least one {what}")
    for row, item in items:
        if not isinstance(item, dict):
            raise InputError(source, f"record is a JSON {jtype(item)}", row=row,
                             expected=f"a JSON object ({what})", got=item)
    return [Record(source, row, item) for row, item in items]


def jtype(value: object) -> str:
    kinds = ((type(None), "null"), (bool, "boolean"), (int, "integer"), (float, "number"),
             (str, "string"), (list, "array"), (dict, "object"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def keys_or(value: object) -> object:
    return sorted(value)[:8] if isinstance(value, dict) else value


def where(row: int | str) -> str:
    return f"row {row}" if isinstance(row, int) else f"record {row!r}"


MISSING = object()


def lookup(data: dict, path: str) -> Any:
    """``data[path]``, following dots through nested objects when ``path`` is
    not itself a key (so ``"meta.firstModel"`` works); :data:`MISSING` if absent."""
    if path in data:
        return data[path]
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


@dataclass(frozen=True)
class Record:
    """One record of a foreign file, with typed access that says where it failed."""

    source: str
    row: int | str
    data: dict
    prefix: str = ""

    def fail(self, message: str, key: str | None = None, *, expected: str | None = None,
             got: object = None) -> NoReturn:
        name = None if key is None else self.prefix + key
        raise InputError(self.source, message, row=self.row, field=name, expected=expected,
                         got=got)

    def child(self, key: str, data: dict) -> Record:
        return Record(self.source, self.row, data, f"{self.prefix}{key}.")

    def raw(self, key: str, expected: str, *, required: bool = True) -> Any:
        value = lookup(self.data, key)
        if value is MISSING and required:
            self.fail("required field is missing", key, expected=expected)
        return None if value is MISSING else value

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
            self.fail(f"wrong type: JSON {jtype(value)}", key, expected=expected, got=value)
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
                self.fail(f"wrong type: JSON {jtype(value)}", f"{key}[{i}]",
                          expected=f"a string ({what})", got=value)
        return values

    def objects(self, key: str, items: list, shape: str) -> list[Record]:
        """Each element of a JSON array as a record, failing on one that is not an object."""
        out = []
        for i, raw in enumerate(items):
            if not isinstance(raw, dict):
                self.fail(f"wrong type: JSON {jtype(raw)}", f"{key}[{i}]",
                          expected=f"a JSON object {shape}", got=raw)
            out.append(self.child(f"{key}[{i}]", raw))
        return out

    def timestamp(self, *keys: str) -> datetime | None:
        """The first of ``keys`` present: ISO 8601 text (UTC when no offset is
        given), unix seconds, or a MongoDB ``{"$date": ...}``."""
        for key in keys:
            value = lookup(self.data, key)
            if value is not MISSING and value is not None:
                try:
                    return _parse_time(value)
                except (ValueError, TypeError, OverflowError, OSError, KeyError):
                    self.fail("not a valid date-time", key, expected=_TIME_EXPECTED, got=value)
        return None


_TIME_EXPECTED = "an ISO 8601 date-time, unix seconds, or {\"$date\": ...}"


def _parse_time(value: Any) -> datetime:
    if isinstance(value, dict) and "$date" in value:
        inner = value["$date"]
        if isinstance(inner, dict):
            inner = int(inner["$numberLong"])
        if isinstance(inner, str):
            return _parse_time(inner)
        if isinstance(inner, bool) or not isinstance(inner, int | float):
            raise TypeError(type(inner).__name__)
        value = inner / 1000  # MongoDB extended JSON counts milliseconds
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value.strip())
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    raise TypeError(type(value).__name__)


def conversation(rec: Record, key: str) -> list[tuple[str, str]] | None:
    """[(role, content)] of a conversation field, or None when absent."""
    items = rec.array(key, "of {role, content} turns", required=False)
    if items is None:
        return None
    if not items:
        rec.fail("conversation is empty", key, expected="at least one turn", got=items)
    return [(item.text("role", "the speaker").strip(),
             item.text("content", "the turn's text", empty=True))
            for item in rec.objects(key, items, "{role, content}")]


def pick_turn(rec: Record, key: str, conversation: list[tuple[str, str]], role: str,
         last: bool) -> str:
    """The first (or ``last``) turn of ``role`` in a conversation."""
    found = [content for who, content in conversation if who == role]
    if not found:
        rec.fail(f"conversation has no {role!r} turn", key,
                 expected=f"a turn with role {role!r}", got=[who for who, _ in conversation])
    return found[-1] if last else found[0]
