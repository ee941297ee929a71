"""Reading JSON and JSON Lines input safely, for our own tables, foreign
exports and bundle manifests alike.

Every reader goes through here so that the same limits hold everywhere: a
size cap (no reading ``/dev/zero`` forever), a nesting limit (no
``RecursionError`` deep inside the parser), no lone UTF-16 surrogates (they
cannot be stored as UTF-8), and one definition of a JSON Lines line: text
between ``\\n`` characters. ``str.splitlines`` is not used because it also
splits on U+2028 and other characters a JSON string may hold raw.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from clinieval.errors import InputError

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted; real exports need fewer than 10."""

MAX_BYTES = 4 << 30
"""Largest input file read (4 GiB): far beyond the paper-scale snapshot."""

JSONL_SUFFIXES = (".jsonl", ".ndjson")

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_bytes(path: str | Path, *, limit: int = MAX_BYTES, head: bool = False) -> bytes:
    """The bytes of a regular file no larger than ``limit`` (with ``head``, its
    first ``limit`` bytes). Devices, pipes and folders are refused, since
    reading them may never end."""
    path = Path(path)
    try:
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not a regular file" if path.exists() \
                else "missing"
            raise InputError(str(path), f"cannot read the file: it is {what}",
                             expected="a regular file")
        size = path.stat().st_size
        if size > limit and not head:
            raise InputError(str(path), f"file is too large ({size:,} bytes)",
                             expected=f"at most {limit:,} bytes")
        with path.open("rb") as handle:
            return handle.read(limit)
    except OSError as exc:
        raise InputError(str(path), f"cannot read the file ({exc.strerror or exc})") from None


def decode(data: bytes, source: str) -> str:
    """UTF-8 text of ``data`` without a byte-order mark; the error names the offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            source, f"file is not valid UTF-8: byte 0x{data[exc.start]:02x} at byte offset"
                    f" {exc.start} (line {line})",
            row=line, expected="UTF-8 encoded text",
            got=data[max(0, exc.start - 10): exc.start + 10]) from None
    return text.removeprefix("\ufeff")


def read_text(path: str | Path, *, limit: int = MAX_BYTES) -> tuple[str, str]:
    """(source name, text) of a non-empty UTF-8 file."""
    source = str(path)
    text = decode(read_bytes(path, limit=limit), source)
    if not text.strip():
        raise InputError(source, "file is empty", expected="a JSON document or JSON Lines records")
    return source, text


def nesting_depth(text: str) -> int:
    """Deepest nesting of ``[`` and ``{`` outside strings (a bound used before
    parsing, so the parser never recurses deeply)."""
    data = text.encode("utf-8", "surrogatepass")
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return 0
    stripped = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    step = (np.isin(stripped, (ord("["), ord("{"))).astype(np.int32)
            - np.isin(stripped, (ord("]"), ord("}"))))
    return int(np.cumsum(step).max(initial=0))


def loads(text: str, source: str, *, row: int | None = None) -> Any:
    """Parse one JSON document; every failure is an :class:`InputError`."""
    depth = nesting_depth(text)
    if depth > MAX_DEPTH:
        raise InputError(source, f"JSON is nested {depth} levels deep", row=row,
                         expected=f"at most {MAX_DEPTH} levels of arrays and objects")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _json_error(source, exc, text, row) from None
    except ValueError:  # an integer of more digits than Python converts
        raise InputError(source, "a number too long to read", row=row,
                         expected=f"numbers of at most {sys.get_int_max_str_digits()} digits"
                         ) from None
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value, text, source, row)
    return value


def _check_surrogates(value: Any, text: str, source: str, row: int | None) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        escape = _SURROGATE_ESCAPE.search(text)
        line = row if row is not None else text.count("\n", 0, escape.start()) + 1
        raise InputError(source, "a string holds a lone UTF-16 surrogate, which is not text",
                         row=line, expected="paired surrogate escapes (\\ud83d\\ude00)",
                         got=exc.object[exc.start:exc.end].encode("utf-8", "backslashreplace")
                         ) from None


def _json_error(source: str, exc: json.JSONDecodeError, text: str, line: int | None,
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


def json_lines(text: str, source: str) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON Lines text."""
    return list(iter_json_lines(text, source))


def iter_json_lines(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """:func:`json_lines` one line at a time, never a list of every line: a
    reader that keeps only a slice of values bounds its memory by that."""
    start, number = 0, 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        number += 1
        line = text[start:end]
        if line.strip():
            yield number, loads(line, source, row=number)
        start = end + 1


def looks_like_jsonl(path: str | Path, text: str) -> bool:
    """JSON Lines by suffix, or when the first non-blank line is a complete
    JSON object and another line follows."""
    if str(path).lower().endswith(JSONL_SUFFIXES):
        return True
    first, _, rest = text.lstrip().partition("\n")
    if not rest.strip():
        return False
    try:
        return isinstance(json.loads(first), dict)
    except (ValueError, RecursionError):  # ValueError: JSON's errors, an over-long integer
        return False
