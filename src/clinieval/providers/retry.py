"""When to retry a failed HTTP call and how long to wait first.

Exponential backoff with full jitter (a uniform wait in [0, base * 2**n],
capped), so that many clients throttled at once do not retry in lockstep; a
server's ``Retry-After`` wins over the computed wait when it asks for longer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Statuses worth a retry: rate limits, timeouts and server-side failures
(529 is Anthropic's "overloaded").
Other 4xx mean the request itself is wrong and will fail again."""


@dataclass(frozen=True)
class RetryPolicy:
    """How many tries and how long between them (seconds)."""

    max_attempts: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0
    retry_after_cap_s: float = 120.0

    def wait_s(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Wait before try ``attempt + 1`` after try ``attempt`` (1-based) failed."""
        backoff = rng.uniform(0, min(self.cap_s, self.base_s * 2 ** (attempt - 1)))
        if retry_after_s is None:
            return backoff
        return max(backoff, min(retry_after_s, self.retry_after_cap_s))


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP
    date (RFC 9110, section 10.2.3); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None
