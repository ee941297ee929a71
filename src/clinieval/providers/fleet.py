"""Replicas of one model: which one a call goes to, and which are out.

A call goes to the replica with the fewest calls outstanding among those
whose breaker admits calls, whose adaptive limit has room and whose
``Retry-After`` has passed. A call that failed on one replica is sent next
to another when there is one.

The fleet as a whole has its own bound, ``in_flight`` (the model file's
``max_in_flight``): calls outstanding over all replicas. By default it is
the replicas' ceilings added up, so it never binds; set below that sum
with each replica's ceiling above its share (N+1 sizing), the replicas left
after one is lost take up its share instead of each staying at its own, and
a run is no slower for the loss than the servers left make it. Calls on a
replica that has left the liveness question unanswered for
``SUSPECT_AFTER_S`` no longer count against that bound (they are most
likely lost, and their share is sent elsewhere while the question runs);
each replica's own ceiling still holds.

A replica that stops answering altogether (a frozen process keeps its
connections open and says nothing) is found by a watchdog in two ways:

- Asked. When a replica with calls out has said nothing for the slowest
  recent call (at most half a second), the watchdog asks whether its server
  answers HTTP at all (the provider's ``alive``: a GET on a connection of
  its own, any status counts), and again each time the silence has doubled.
  No answer within ``CHECK_TIMEOUT_S`` and still no word from its calls: the
  replica is frozen. Every replica is also asked once when the watchdog
  starts, so this needs no history of calls and finds a replica frozen
  before its first answer; it takes at most 2.75 s however long calls are.
- Inferred, for a server that answers HTTP but not its calls: nothing came
  back from it for ten times the slowest recent call anywhere in the fleet,
  and for at least ``STALL_FLOOR_S``.
  Only a fallback: on a loaded 2-core machine a llama-server's calls took
  from 4 s to 12 s within one run, and tighter rules (four times that call,
  or one such call while the peers answered two rounds of their limits: a
  server answers its whole batch at once) cut healthy replicas.

Either way its calls are cut short (and retried elsewhere) and its breaker
opens. After the cool-down the same question is asked in the background,
and only a replica that answers it gets one real call as the probe: no
call waits on a server that is still frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from clinieval.providers import failure
from clinieval.providers.adaptive import AIMDLimit, Breaker

STALL_FACTOR = 10.0
"""A replica is stalled when nothing came back from it for this many times
the slowest recent call anywhere in the fleet."""
STALL_FLOOR_S = 10.0
"""Never sooner than this (with a 1 s floor, bench_fleet at load 10 cut two
healthy 20 ms stubs whose process had paused: the question, which allows
2 s, finds a frozen server long before)."""
WATCH_S = 0.25
OVERLOADED = frozenset({"HTTP 429", "HTTP 503", "HTTP 529"})
"""Failures by which a server says it has too much to do: the adaptive limit
shrinks, the breaker is left alone."""
SLOWEST_DECAY = 0.995
"""The slowest-recent-call figure forgets an old maximum this fast (per call)."""
CHECK_AFTER_S = 0.5
"""A replica with calls out that said nothing for this long (or for the
slowest recent call, when shorter) is asked whether it is alive, then again
each time its silence doubles."""
SUSPECT_AFTER_S = 0.5
"""A replica whose liveness question has gone unanswered this long stops
counting against the fleet's in-flight bound: a loopback or LAN server
answers in milliseconds, so a healthy one is rarely suspected, and a wrong
suspicion sends a few calls beyond the bound to replicas with room under
their own ceilings. A frozen one's share is sent elsewhere about 1.5 s
sooner than when the question times out."""
CHECK_TIMEOUT_S = 2.0
"""How long a server has to answer that question. A loopback or LAN server
answers in milliseconds, a hosted API in a fraction of a second; but two
busy llama-servers on a 2-core machine at load 24 did not always answer in
0.5 s (a timeout learned as 20x the slowest answer, floored there, cut
healthy replicas). A wrong "frozen" costs its calls' work, never a call."""

Alive = Callable[[str, float], Awaitable[str | None]]
"""(replica URL, timeout in seconds) -> None when its server answered, else
why not (a message starting with its kind, as :mod:`failure` names them)."""


@dataclass(frozen=True)
class FleetSettings:
    """How replicas are balanced and taken out (model file fields)."""

    start: int = 8
    maximum: int = 8
    adaptive: bool = True
    breaker_failures: int = 3
    breaker_cooldown_s: float = 5.0
    timeout_s: float = 120.0
    in_flight: int | None = None
    """Most calls outstanding over all replicas (None: their maxima added up)."""


@dataclass
class Replica:
    """One endpoint and its live state."""

    url: str
    limit: AIMDLimit
    breaker: Breaker
    outstanding: int = 0
    not_before: float = 0.0
    last_event: float = 0.0
    calls: int = 0
    ok: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    timers: set = field(default_factory=set)
    check: asyncio.Task | None = None
    """The liveness question in flight, if any."""
    asked_at: float | None = None
    """When that question was asked."""
    check_after: float = CHECK_AFTER_S
    """Silence after which it is asked (doubles after each answer)."""
    checks_failed: int = 0

    def free(self, now: float) -> bool:
        return (self.outstanding < self.limit.current and now >= self.not_before
                and self.breaker.admits(now) and not self.suspect(now))

    def suspect(self, now: float) -> bool:
        """Its liveness question has been out for ``SUSPECT_AFTER_S`` unanswered."""
        return self.asked_at is not None and now - self.asked_at >= SUSPECT_AFTER_S

    def report(self) -> ReplicaReport:
        return ReplicaReport(self.url, self.calls, self.ok, dict(self.failures),
                             self.limit.current, int(self.limit.lowest), self.limit.maximum,
                             self.breaker.state, self.breaker.times_opened, self.checks_failed)


@dataclass(frozen=True)
class ReplicaReport:
    """What one replica did in a run: calls sent, answered, failed by cause,
    the concurrency its limit settled at (and its lowest), its breaker."""

    url: str
    calls: int
    ok: int
    failures: dict[str, int]
    concurrency: int
    lowest_concurrency: int
    max_concurrency: int
    breaker: str
    times_opened: int
    checks_failed: int = 0
    """Liveness questions it did not answer in time (or refused)."""


class Fleet:
    """The replicas of one model file and the calls waiting for one of them."""

    def __init__(self, urls: list[str], settings: FleetSettings, alive: Alive | None = None
                 ) -> None:
        self.settings = settings
        # Liveness questions only where there is a watchdog to ask them (two
        # replicas or more); a lone replica's breaker probes with a real call.
        self._alive = alive if len(urls) > 1 else None
        self.replicas = [Replica(url, AIMDLimit(settings.start, settings.maximum),
                                 Breaker(settings.breaker_failures, settings.breaker_cooldown_s,
                                         checked=self._alive is not None))
                         for url in urls]
        self.capacity = min(settings.in_flight or settings.maximum * len(urls),
                            settings.maximum * len(urls))
        """Calls the fleet takes at once (counted as ``_counted`` does)."""
        self.spare = min(settings.maximum, settings.maximum * len(urls) - self.capacity) if (
            self._alive is not None) else 0
        """Calls a runner should keep waiting beyond ``capacity``: those a
        suspected replica holds stop counting, and only calls already waiting
        can take their place at once (at most one replica's ceiling, and
        only what the other ceilings leave room for; none without a watchdog
        to suspect one)."""
        self._waiters: list[asyncio.Future] = []
        self._slowest = 0.0
        self.last_failure = ("error", "")
        """(cause, message) of the latest failed call on any replica."""
        self._watchdog: asyncio.Task | None = None
        self._suspected = 0

    async def acquire(self, avoid: Replica | None = None) -> Replica | None:
        """A replica with room for one more call (waiting until there is one),
        or None at once when every replica's breaker is open: a call then
        fails fast rather than queue for the probes."""
        if self._watchdog is None and len(self.replicas) > 1:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        while True:
            now = time.monotonic()
            replica = self._choose(now, avoid)
            if replica is not None:
                if replica.outstanding == 0:
                    self._event(replica, now)
                replica.outstanding += 1
                replica.calls += 1
                replica.breaker.take()
                return replica
            if not any(r.breaker.admits(now) or (r.breaker.due(now) and self._alive)
                       for r in self.replicas):
                return None
            await self._wait(self._next_change(now))

    def _choose(self, now: float, avoid: Replica | None) -> Replica | None:
        if self._counted(now) >= self.capacity:
            return None
        best = None
        for replica in self.replicas:
            if replica is avoid or not replica.free(now):
                continue
            if best is None or replica.outstanding < best.outstanding:
                best = replica
        if best is None and avoid is not None and avoid.free(now) and not self._others_admit(
                avoid, now):
            best = avoid
        return best

    def _counted(self, now: float) -> int:
        """Calls outstanding that count against the fleet's bound."""
        return sum(r.outstanding for r in self.replicas if not r.suspect(now))

    def _others_admit(self, avoid: Replica, now: float) -> bool:
        """Whether a replica other than ``avoid`` takes calls at all (busy or not)."""
        return any(r is not avoid and r.breaker.admits(now) and now >= r.not_before
                   for r in self.replicas)

    def _next_change(self, now: float) -> float | None:
        """Seconds until a replica's Retry-After or breaker cool-down ends."""
        times = [r.not_before for r in self.replicas if r.not_before > now]
        times += [t for r in self.replicas
                  if (t := r.breaker.reopens_at()) is not None and t > now]
        # A breaker past its cool-down waiting on its liveness question wakes
        # the waiting calls itself when the answer comes.
        return max(0.0, min(times) - now) if times else None

    async def _wait(self, timeout: float | None) -> None:
        """Until a call ends or ``timeout`` passes (no task per wait, unlike
        ``asyncio.wait_for``: many calls may wait at once)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _settle, waiter)
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    def release(self, replica: Replica, cause: str | None, latency_s: float | None, *,
                broken: bool = True, retry_after_s: float | None = None,
                message: str = "") -> None:
        """A call on ``replica`` ended: ``cause`` None when it was answered; a
        failure that is not ``broken`` (an overload, a refused request) leaves
        the breaker alone."""
        now = time.monotonic()
        replica.outstanding -= 1
        self._event(replica, now)
        if cause is None:
            self._answered(replica, latency_s or 0.0)
            self._wake()
            return
        replica.failures[cause] = replica.failures.get(cause, 0) + 1
        self.last_failure = (cause, message)
        if broken:
            replica.breaker.failure(now)
        elif cause in OVERLOADED and self.settings.adaptive:
            replica.limit.overloaded()
        if retry_after_s:
            replica.not_before = max(replica.not_before, now + retry_after_s)
        self._wake_all()  # the fleet changed: every waiting call looks again

    def _event(self, replica: Replica, now: float) -> None:
        replica.last_event = now
        replica.check_after = min(CHECK_AFTER_S, max(WATCH_S, self._slowest or CHECK_AFTER_S))

    def _answered(self, replica: Replica, latency_s: float) -> None:
        replica.ok += 1
        replica.breaker.success()
        self._slowest = max(latency_s, self._slowest * SLOWEST_DECAY)
        if self.settings.adaptive:
            replica.limit.success(latency_s)

    def _wake_all(self) -> None:
        while self._waiters:
            self._wake()

    async def _watch(self) -> None:
        if self._alive is not None:  # once each: one may be frozen from the start
            for replica in self.replicas:
                self._ask(replica, time.monotonic())
        while True:
            await asyncio.sleep(WATCH_S)
            now = time.monotonic()
            for replica in self.replicas:
                if replica.timers and self._stalled(replica, now):
                    self._cut(replica, now)
                elif self._alive is not None and replica.check is None and (
                        (replica.breaker.due(now) and not replica.breaker.cleared) or (
                            replica.timers and now - replica.last_event >= replica.check_after)):
                    self._ask(replica, now)
            self._free_suspects(now)

    def _free_suspects(self, now: float) -> None:
        """Let waiting calls look again when a replica's calls stopped counting."""
        suspected = sum(r.outstanding for r in self.replicas if r.suspect(now))
        if suspected > self._suspected:
            self._wake_all()
        self._suspected = suspected

    def _ask(self, replica: Replica, now: float) -> None:
        replica.asked_at = now
        replica.check = asyncio.get_running_loop().create_task(self._check(replica, now))

    async def _check(self, replica: Replica, asked: float) -> None:
        """Ask whether ``replica``'s server answers at all, and act on the answer."""
        try:
            error = await self._alive(replica.url, CHECK_TIMEOUT_S)
        finally:
            replica.check = None
        now = time.monotonic()
        suspected, replica.asked_at = replica.suspect(now), None
        reopening = replica.breaker.due(now)
        if error is None:
            replica.check_after = 2 * max(replica.check_after, now - replica.last_event)
            if reopening:
                replica.breaker.clear()
            if reopening or suspected:
                self._wake_all()
            return
        replica.checks_failed += 1
        self.last_failure = (failure.cause_of(error), f"{error} (liveness check)")
        if reopening:
            replica.breaker.trip(now)  # still out: open again, for longer
        elif replica.timers and replica.last_event <= asked:
            self._cut(replica, now)  # nothing came back while it was asked either

    def _stalled(self, replica: Replica, now: float) -> bool:
        """Silent for several times the slowest recent call (the liveness
        question finds a frozen server sooner; this finds one that answers
        it but not its calls)."""
        if self._slowest == 0.0:
            return False  # nothing has come back yet: the question or the timeout
        silent = now - replica.last_event
        return silent > max(STALL_FLOOR_S,
                            min(self.settings.timeout_s, STALL_FACTOR * self._slowest))

    def _cut(self, replica: Replica, now: float) -> None:
        """Open ``replica``'s breaker and end its calls now (as timeouts)."""
        replica.breaker.trip(now)
        loop_now = asyncio.get_running_loop().time()
        for timer in list(replica.timers):
            timer.reschedule(loop_now)
        self._event(replica, now)
        self._wake_all()

    def report(self) -> list[ReplicaReport]:
        return [r.report() for r in self.replicas]

    async def aclose(self) -> None:
        tasks = [r.check for r in self.replicas if r.check is not None] + [
            t for t in (self._watchdog,) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._watchdog = None


def _settle(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)
