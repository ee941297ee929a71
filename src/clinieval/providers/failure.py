"""What went wrong with a call, in a few named kinds a user can act on.

Every retryable failure a provider sees is classified once, here, when it
happens; the message it carries starts with that kind, so a stored error
text (``llm_run_calls.error``) can be classified again later by
:func:`cause_of` without the exception at hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

REFUSED = "connection refused"
TIMEOUT = "timeout"
CONNECTION = "connection error"
UNREADABLE = "unreadable response body"
UNPARSED = "unparsed"
LENGTH = "length"
CAUSES = (REFUSED, TIMEOUT, CONNECTION, "HTTP NNN", UNREADABLE, UNPARSED, LENGTH)
"""The kinds, in the order a summary lists them (``HTTP NNN`` stands for
each status seen, e.g. ``HTTP 503``)."""

NOT_FATAL = frozenset({UNPARSED, LENGTH})
"""Kinds a run stores as an outcome (raw text kept, never scored) rather
than as a failed call."""

_HTTP = re.compile(r"^HTTP (\d{3})")


def http_cause(status: int) -> str:
    return f"HTTP {status}"


def cause_of(message: str) -> str:
    """The kind of a failure from its message (one that a provider wrote)."""
    match = _HTTP.match(message)
    if match:
        return http_cause(int(match.group(1)))
    for kind in (REFUSED, TIMEOUT, CONNECTION, UNREADABLE, UNPARSED, LENGTH):
        if message.startswith(kind):
            return kind
    return "other"


@dataclass(frozen=True)
class CauseCount:
    """How many failed calls had one cause, with the first one's message."""

    cause: str
    count: int
    example: str
    fatal: bool


def failures_by_cause(failures: Iterable[tuple[str, str]]) -> list[CauseCount]:
    """Group ``(cause, message)`` pairs by cause, most frequent first, the first
    message of each kept as its example."""
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    for cause, message in failures:
        counts[cause] = counts.get(cause, 0) + 1
        examples.setdefault(cause, message)
    return [CauseCount(c, n, examples[c], c not in NOT_FATAL)
            for c, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
