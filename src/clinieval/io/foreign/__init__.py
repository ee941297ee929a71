"""Readers for foreign evaluation formats, one module each, registered here.

Each format module exposes ``read(path, *, rubric, criterion_map, ...)`` and
``looks_like(record)``; :data:`FORMATS` is the one registry, and
:func:`sniff_format` tells them apart from a file's first record.
"""

from __future__ import annotations

import json
import pathlib
import types

from clinieval.io import jsontext
from clinieval.io.foreign import arena, healthbench, inspect_log, medmcqa, medqa, moove, pubmedqa
from clinieval.io.foreign.builder import UNSPECIFIED, case_id_for

__all__ = ["FORMATS", "UNSPECIFIED", "case_id_for", "sniff_format"]

FORMATS: dict[str, types.ModuleType] = {"moove": moove, "arena": arena, "healthbench": healthbench,
                                        "medqa": medqa, "medmcqa": medmcqa,
                                        "pubmedqa": pubmedqa, "inspect": inspect_log}
"""Foreign format name -> its module (``read`` and ``looks_like``)."""

_SNIFF_BYTES = 1 << 20


def _classify(record: object) -> str:
    if not isinstance(record, dict):
        return "unknown"
    for name, module in FORMATS.items():
        if module.looks_like(record):
            return name
    if record and all(isinstance(v, dict) for v in record.values()):
        return _classify(next(iter(record.values())))  # an object keyed by record id
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


def sniff_format(path: str | pathlib.Path) -> str:
    """Which reader fits: a name in :data:`FORMATS` or ``"unknown"``, judged
    from the first record (reading only the first MiB when it fits in it); an
    inspect_ai ``.eval`` archive is told by its members."""
    if inspect_log.is_eval_archive(pathlib.Path(path)):
        return "inspect"
    head = jsontext.read_bytes(path, limit=_SNIFF_BYTES, head=True)
    more = pathlib.Path(path).stat().st_size > len(head)
    for data in (head, jsontext.read_bytes(path) if more else None):
        if data is None:
            break
        try:
            text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
            return _classify(_first_value(text))
        # ValueError: JSON's own errors and an integer too long to convert.
        except (ValueError, IndexError, RecursionError):
            continue
    return "unknown"
