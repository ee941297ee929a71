"""Cache keys: a SHA-256 over canonical JSON of everything that decides a
call's answer, so the same call is never paid for twice and a changed
setting, message or model version never hits a stale entry."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""One encoder for all: ``json.dumps`` with options builds a new one per call."""


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return _CANONICAL.encode(value)


def call_key(model_version: str, messages: Sequence[Mapping[str, str]],
             settings: Mapping[str, Any], sample: int, settings_text: str | None = None) -> str:
    """The cache key of one call: hash(model version, messages, settings, sample index).

    The hashed text is ``canonical({"messages": ..., "model": ..., "sample": ...,
    "settings": ...})``, put together from its parts so that ``settings_text``
    (``canonical(settings)``, when the caller has it: all calls of a juror
    share their settings, response schema included) is not encoded again."""
    if settings_text is None:
        settings_text = canonical(dict(settings))
    material = (f'{{"messages":{canonical(list(messages))},"model":{canonical(model_version)},'
                f'"sample":{canonical(sample)},"settings":{settings_text}}}')
    return hashlib.sha256(material.encode()).hexdigest()


def digest(parts: Iterable[str], length: int = 16) -> str:
    """A short hash of several strings (order matters), for derived ids."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:length]
