"""Adaptive concurrency for one endpoint (AIMD) and its circuit breaker.

:class:`AIMDLimit` is TCP's congestion rule applied to calls in flight: the
limit grows by about one per limit's worth of healthy calls (additive
increase) and halves on a rate-limit answer or shrinks by a tenth when
latency rises (multiplicative decrease), always within ``[1, maximum]``.
After a decrease, further signals are ignored until a limit's worth of calls
has finished, so one burst of 429s (all sent before the first came back)
counts once.

"Rising" latency compares a short-term average with a long-term one (the
gradient rule of Netflix's concurrency-limits): a server that is slow at its
usual load is left alone; one that gets slower as more is sent to it is not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

SHORT_ALPHA = 0.2
LONG_ALPHA = 0.02
RISE = 2.0
"""Short-term latency above this multiple of the long-term one is "rising"."""
LATENCY_DECREASE = 0.9
OVERLOAD_DECREASE = 0.5


class AIMDLimit:
    """How many calls one endpoint may have in flight now."""

    def __init__(self, start: int, maximum: int) -> None:
        self.maximum = maximum
        self.limit = float(min(max(1, start), maximum))
        self.lowest = self.limit
        self.decreases = 0
        self._short = self._long = 0.0
        self._quiet = 0  # finished calls to wait for before the next decrease
        # Latency is not judged over the first two limits' worth of answers:
        # the first come from an idle server.
        self._warming = 2 * self.current

    @property
    def current(self) -> int:
        return int(self.limit)

    def success(self, latency_s: float) -> None:
        self._quiet = max(0, self._quiet - 1)
        self._warming = max(0, self._warming - 1)
        if self._long == 0.0:
            self._short = self._long = latency_s
        else:
            self._short += SHORT_ALPHA * (latency_s - self._short)
            self._long += LONG_ALPHA * (latency_s - self._long)
        if self._short > RISE * self._long and not self._warming:
            self._decrease(LATENCY_DECREASE)
        elif self.limit < self.maximum:
            self.limit = min(self.maximum, self.limit + 1.0 / self.limit)

    def overloaded(self) -> None:
        """The endpoint said it is overloaded (429, 529, 503)."""
        self._decrease(OVERLOAD_DECREASE)

    def _decrease(self, factor: float) -> None:
        if self._quiet:
            return
        self.limit = max(1.0, self.limit * factor)
        self.lowest = min(self.lowest, self.limit)
        self.decreases += 1
        self._quiet = max(1, self.current)
        self._long = self._short  # the new load's latency is the new normal


@dataclass
class Breaker:
    """Open after ``failures`` consecutive failures; after ``cooldown_s`` let one
    call through as a probe (half-open): success closes it, failure opens it
    again for twice as long (up to eight times the cool-down).

    ``checked``: past the cool-down the breaker is only *due*; it lets the
    probe through once its owner has seen the endpoint answer a cheap
    question (:meth:`clear`), or opens again (:meth:`trip`) when it did not.
    """

    failures: int = 3
    cooldown_s: float = 5.0
    checked: bool = False
    cleared: bool = False
    consecutive: int = 0
    opened_at: float | None = None
    wait_s: float = 0.0
    probing: bool = False
    times_opened: int = 0

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        return "half-open" if self.probing else "open"

    def admits(self, now: float) -> bool:
        """Whether a call may go to the endpoint now (without taking the probe)."""
        if self.opened_at is None:
            return True
        return self.due(now) and (self.cleared or not self.checked)

    def due(self, now: float) -> bool:
        """Open, past its cool-down and not probing: time to look again."""
        return (self.opened_at is not None and not self.probing
                and now >= self.opened_at + self.wait_s)

    def clear(self) -> None:
        """The endpoint answered the cheap question: let the probe through."""
        self.cleared = True

    def take(self) -> None:
        """A call was sent; when open, it is the probe."""
        if self.opened_at is not None:
            self.probing = True

    def reopens_at(self) -> float | None:
        return None if self.opened_at is None or self.probing else self.opened_at + self.wait_s

    def success(self) -> None:
        self.consecutive, self.opened_at, self.probing, self.cleared = 0, None, False, False

    def failure(self, now: float | None = None) -> None:
        self.consecutive += 1
        if self.probing or (self.opened_at is None and self.consecutive >= self.failures):
            self.trip(now)

    def trip(self, now: float | None = None) -> None:
        """Open now (a failed probe doubles the wait)."""
        again = self.opened_at is not None
        self.wait_s = min(8 * self.cooldown_s, 2 * self.wait_s) if again else self.cooldown_s
        self.opened_at = time.monotonic() if now is None else now
        self.probing = self.cleared = False
        self.times_opened += 1
