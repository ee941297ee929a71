"""What every HTTP provider shares, on aiohttp: one session per replica sized
to its limit, the fleet that picks a replica per call, retries with jittered
backoff honouring ``Retry-After``, and one classification of failures.

A subclass says only how its API is spoken: the request's path and body,
its headers, how a 200 body reads as a :class:`Completion`, and which
failures carry their wait in the body. Failures that another try may cure (rate
limits, server errors, broken connections, timeouts, unreadable bodies) are
retried, on another replica first when there is one; a 4xx that says the
request itself is wrong fails at once.

aiohttp rather than httpx: against the stub server (``providers.stub``, its
own process) answering in 20 ms with 64 calls in flight, bare httpx
AsyncClients (httpcore on anyio) spent 0.7-0.8 ms of CPU per call and a bare
aiohttp session 0.11 ms, and one core must carry well over 1,500 calls a
second.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import aiohttp

from clinieval.errors import ConfigError
from clinieval.providers import failure
from clinieval.providers.base import CallFailed, Completion, Message
from clinieval.providers.fleet import OVERLOADED, Fleet, FleetSettings, Replica, ReplicaReport
from clinieval.providers.modelfile import ModelSpec
from clinieval.providers.retry import RETRY_STATUSES, RetryPolicy, parse_retry_after


class Retryable(Exception):
    """One try failed in a way another try may not; carries its cause and the
    server's wait."""

    def __init__(self, message: str, cause: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.cause, self.retry_after_s = cause, retry_after_s


class HTTPProvider:
    """A provider over JSON HTTP for one model file (subclass per API)."""

    def __init__(self, spec: ModelSpec, *, policy: RetryPolicy | None = None,
                 seed: int | None = None) -> None:
        self.spec = spec
        self.policy = policy or RetryPolicy(max_attempts=spec.max_attempts)
        self.fleet = Fleet(list(spec.base_urls), fleet_settings(spec), alive=self.alive)
        self.concurrency = self.fleet.capacity + self.fleet.spare
        self._headers = self.headers(api_key(spec.api_key_env)) | {
            "content-type": "application/json"}
        self._timeout = aiohttp.ClientTimeout(total=spec.timeout_s,
                                              sock_connect=min(10.0, spec.timeout_s))
        self._tls: ssl.SSLContext | None = None
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._checks: aiohttp.ClientSession | None = None
        self._proxies = {url: _env_proxy(url) for url in spec.base_urls}
        self._rng = random.Random(seed)

    # What a subclass defines.

    def headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def request(self, messages: Sequence[Message], settings: Mapping[str, Any]
                ) -> tuple[str, dict[str, Any]]:
        """(path after the base URL, JSON body) of one call."""
        raise NotImplementedError

    def completion(self, data: Any, latency_s: float, attempt: int) -> Completion:
        """A 200 body as a completion; KeyError, IndexError, TypeError or
        ValueError when it is not one."""
        raise NotImplementedError

    def body_retry_after(self, data: Any) -> float | None:
        """A wait the API puts in an error body rather than a header."""
        return None

    # The shared machinery.

    async def generate(self, messages: Sequence[Message], settings: Mapping[str, Any]
                       ) -> Completion:
        path, body = self.request(messages, settings)
        payload = json.dumps(body).encode()
        avoid: Replica | None = None
        for attempt in range(1, self.policy.max_attempts + 1):
            replica = await self.fleet.acquire(avoid)
            try:
                if replica is None:
                    cause, message = self.fleet.last_failure
                    raise Retryable(f"{message} (every replica is out)", cause)
                completion = await self._attempt(replica, path, payload, attempt)
            except Retryable as err:
                if attempt == self.policy.max_attempts:
                    failed = CallFailed(f"{err} (after {attempt} tries)", attempt, err.cause)
                    failed.endpoint = replica.url if replica is not None else None
                    raise failed from None
                avoid = replica
                if replica is None or not self._elsewhere(replica):
                    await asyncio.sleep(self.policy.wait_s(attempt, err.retry_after_s,
                                                           self._rng))
            else:
                return completion
        raise AssertionError("unreachable: the loop returns or raises")

    async def _attempt(self, replica: Replica, path: str, payload: bytes, attempt: int
                       ) -> Completion:
        """One try on ``replica``, its outcome told to the fleet."""
        try:
            completion = await self._try(replica, path, payload, attempt)
        except Retryable as err:
            self.fleet.release(replica, err.cause, None, broken=err.cause not in OVERLOADED,
                               retry_after_s=err.retry_after_s, message=str(err))
            raise
        except CallFailed as err:  # the request is wrong, not the replica
            self.fleet.release(replica, err.cause, None, broken=False, message=str(err))
            err.endpoint = replica.url
            raise
        except BaseException:
            self.fleet.release(replica, "cancelled", None, broken=False)
            raise
        self.fleet.release(replica, None, completion.latency_s)
        return replace(completion, endpoint=replica.url)

    def _elsewhere(self, failed: Replica) -> bool:
        """Whether another replica takes calls now (then retry there at once)."""
        now = time.monotonic()
        return any(r is not failed and r.breaker.admits(now) and now >= r.not_before
                   for r in self.fleet.replicas)

    async def _try(self, replica: Replica, path: str, payload: bytes, attempt: int
                   ) -> Completion:
        session = self._session(replica.url)
        url = replica.url + path
        start = time.perf_counter()
        try:
            # The fleet's watchdog ends the call through ``timer`` if the replica stalls.
            async with asyncio.timeout(None) as timer:
                replica.timers.add(timer)
                async with session.post(url, data=payload,
                                        proxy=self._proxies[replica.url]) as response:
                    content = await response.read()
        except TimeoutError as err:
            raise Retryable(f"{failure.TIMEOUT} ({type(err).__name__}) at {url}",
                            failure.TIMEOUT) from None
        except aiohttp.ClientConnectorError as err:
            cause = failure.REFUSED if isinstance(err.os_error, ConnectionRefusedError) else (
                failure.CONNECTION)
            raise Retryable(f"{cause} at {url}: {err.os_error!r}", cause) from None
        except aiohttp.ClientError as err:
            raise Retryable(f"{failure.CONNECTION} at {url}: {err!r}",
                            failure.CONNECTION) from None
        finally:
            replica.timers.discard(timer)
        latency = time.perf_counter() - start
        if response.status != 200:
            self._refuse(response, content, url, attempt)
        return self._read(content, latency, attempt, url)

    def _refuse(self, response: aiohttp.ClientResponse, content: bytes, url: str,
                attempt: int) -> None:
        status = response.status
        cause = failure.http_cause(status)
        text = content[:300].decode("utf-8", "replace")
        if status not in RETRY_STATUSES:
            raise CallFailed(f"{cause} from {url}: {text}", attempt, cause)
        wait = parse_retry_after(response.headers.get("retry-after"), time.time())
        if wait is None:
            wait = self.body_retry_after(_json_or_none(content))
        raise Retryable(f"{cause} from {url}: {text[:120]}", cause, wait)

    def _read(self, content: bytes, latency: float, attempt: int, url: str) -> Completion:
        """A body that is not a completion is retried: proxies and overloaded
        servers sometimes send truncated or HTML bodies."""
        try:
            return self.completion(json.loads(content), latency, attempt)
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise Retryable(f"{failure.UNREADABLE} from {url} ({type(err).__name__}:"
                            f" {content[:80]!r})", failure.UNREADABLE) from None

    def _session(self, url: str) -> aiohttp.ClientSession:
        """The replica's session, made on first use: aiohttp wants a running loop."""
        session = self._sessions.get(url)
        if session is None:
            if self._tls is None:
                self._tls = ssl.create_default_context()  # one for all: loading CAs is slow
            connector = aiohttp.TCPConnector(limit=self.fleet.settings.maximum, ssl=self._tls)
            session = self._sessions[url] = aiohttp.ClientSession(
                headers=self._headers, timeout=self._timeout, connector=connector)
        return session

    async def probe(self, replica: Replica, timeout_s: float) -> str | None:
        """One cheap call to ``replica`` (a one-token answer), no retry: None
        when it answered, else the error."""
        path, body = self.request([{"role": "user", "content": "ping"}],
                                  self.probe_settings())
        try:
            async with asyncio.timeout(timeout_s):
                await self._try(replica, path, json.dumps(body).encode(), 1)
        except (Retryable, CallFailed) as err:
            return str(err)
        except TimeoutError:
            return f"{failure.TIMEOUT} after {timeout_s:g} s at {replica.url}"
        return None

    async def alive(self, url: str, timeout_s: float) -> str | None:
        """Whether the server at ``url`` answers HTTP at all: a GET of
        ``{url}/models`` (OpenAI-compatible servers, Anthropic and Gemini all
        serve it), any status counting as an answer, on a session of its own
        so that calls in flight do not hold the question up. None when it
        answered, else why not."""
        if self._checks is None:
            if self._tls is None:
                self._tls = ssl.create_default_context()
            self._checks = aiohttp.ClientSession(
                headers=self._headers, connector=aiohttp.TCPConnector(limit=0, ssl=self._tls))
        target = url + "/models"
        try:
            async with asyncio.timeout(timeout_s), self._checks.get(
                    target, proxy=self._proxies[url]) as response:
                await response.read()
        except TimeoutError:
            return f"{failure.TIMEOUT}: no answer within {timeout_s:g} s at {target}"
        except aiohttp.ClientConnectorError as err:
            cause = failure.REFUSED if isinstance(err.os_error, ConnectionRefusedError) else (
                failure.CONNECTION)
            return f"{cause} at {target}: {err.os_error!r}"
        except aiohttp.ClientError as err:
            return f"{failure.CONNECTION} at {target}: {err!r}"
        return None

    def probe_settings(self) -> dict[str, Any]:
        return {"max_tokens": 1}

    def report(self) -> list[ReplicaReport]:
        """Per replica: calls, answers, failures by cause, settled concurrency."""
        return self.fleet.report()

    async def aclose(self) -> None:
        await self.fleet.aclose()
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()
        if self._checks is not None:
            await self._checks.close()
            self._checks = None


def fleet_settings(spec: ModelSpec) -> FleetSettings:
    maximum = spec.max_concurrency or spec.concurrency
    return FleetSettings(start=spec.concurrency, maximum=maximum, adaptive=spec.adaptive,
                         breaker_failures=spec.breaker_failures,
                         breaker_cooldown_s=spec.breaker_cooldown_s, timeout_s=spec.timeout_s,
                         in_flight=spec.max_in_flight)


def api_key(env_name: str | None) -> str | None:
    """The key from the environment variable the model file names; it is only
    ever placed in a request header, never stored."""
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise ConfigError(f"environment variable {env_name} (the model file's api_key_env)"
                          " is not set")
    return key


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``
    ...), read once: aiohttp's ``trust_env`` reads it, and ``~/.netrc``, again
    on every request (measured: a tenth of the runner's CPU)."""
    scheme, host = urllib.parse.urlsplit(url).scheme, urllib.parse.urlsplit(url).hostname
    if host is None or urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(scheme)
