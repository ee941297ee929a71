"""The OpenAI-compatible chat-completions provider (vLLM, llama.cpp's server,
Ollama, hosted APIs), on aiohttp.

Replicas are used in turn; each base URL has its own limit of calls in
flight and one session whose keep-alive pool is sized to that limit. Rate
limits, server errors, broken connections, timeouts and unreadable bodies are
retried with jittered exponential backoff, honouring ``Retry-After``. The API
key is read from the environment variable the model file names and only ever
placed in the request header.

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
from itertools import count
from typing import Any

import aiohttp

from clinieval.errors import ConfigError
from clinieval.providers.base import CallFailed, Completion, Message, register
from clinieval.providers.modelfile import ModelSpec
from clinieval.providers.retry import RETRY_STATUSES, RetryPolicy, parse_retry_after


class _Retryable(Exception):
    """One try failed in a way another try may not; carries the server's wait."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class _Endpoint:
    """One base URL: its limit of calls in flight and its connection pool."""

    def __init__(self, base_url: str, concurrency: int) -> None:
        self.url = f"{base_url}/chat/completions"
        self.concurrency = concurrency
        self.slots = asyncio.Semaphore(concurrency)
        self.proxy = _env_proxy(self.url)
        self.session: aiohttp.ClientSession | None = None

    def open(self, headers: dict[str, str], timeout: aiohttp.ClientTimeout,
             tls: ssl.SSLContext) -> aiohttp.ClientSession:
        """The session, made on first use: aiohttp wants a running event loop."""
        if self.session is None:
            connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=tls)
            self.session = aiohttp.ClientSession(headers=headers, timeout=timeout,
                                                 connector=connector)
        return self.session


@register("openai")
class OpenAICompatible:
    """Chat completions over HTTP for one model file."""

    def __init__(self, spec: ModelSpec, *, policy: RetryPolicy | None = None,
                 seed: int | None = None) -> None:
        self.spec = spec
        self.policy = policy or RetryPolicy(max_attempts=spec.max_attempts)
        self.concurrency = spec.concurrency * len(spec.base_urls)
        self._headers = _auth_headers(spec.api_key_env) | {"content-type": "application/json"}
        self._timeout = aiohttp.ClientTimeout(total=spec.timeout_s,
                                              sock_connect=min(10.0, spec.timeout_s))
        self._tls: ssl.SSLContext | None = None
        self._endpoints = [_Endpoint(url, spec.concurrency) for url in spec.base_urls]
        self._turn = count()
        self._rng = random.Random(seed)

    async def generate(self, messages: Sequence[Message], settings: Mapping[str, Any]
                       ) -> Completion:
        body = json.dumps({"model": self.spec.name, "messages": list(messages),
                           **settings}).encode()
        for attempt in range(1, self.policy.max_attempts + 1):
            endpoint = self._endpoints[next(self._turn) % len(self._endpoints)]
            try:
                async with endpoint.slots:
                    return await self._try(endpoint, body, attempt)
            except _Retryable as err:
                if attempt == self.policy.max_attempts:
                    raise CallFailed(f"{err} (after {attempt} tries)", attempt) from None
                await asyncio.sleep(self.policy.wait_s(attempt, err.retry_after_s, self._rng))
        raise AssertionError("unreachable: the loop returns or raises")

    async def _try(self, endpoint: _Endpoint, body: bytes, attempt: int) -> Completion:
        if self._tls is None:
            self._tls = ssl.create_default_context()  # one for all sessions: loading CAs is slow
        session = endpoint.open(self._headers, self._timeout, self._tls)
        start = time.perf_counter()
        try:
            async with session.post(endpoint.url, data=body, proxy=endpoint.proxy) as response:
                content = await response.read()
        except TimeoutError as err:
            raise _Retryable(f"timeout ({type(err).__name__}) at {endpoint.url}") from None
        except aiohttp.ClientError as err:
            raise _Retryable(f"connection error at {endpoint.url}: {err!r}") from None
        latency = time.perf_counter() - start
        if response.status in RETRY_STATUSES:
            wait = parse_retry_after(response.headers.get("retry-after"), time.time())
            raise _Retryable(f"HTTP {response.status} from {endpoint.url}", wait)
        if response.status != 200:
            text = content[:300].decode("utf-8", "replace")
            raise CallFailed(f"HTTP {response.status} from {endpoint.url}: {text}", attempt)
        return _completion(content, latency, attempt, endpoint.url)

    async def aclose(self) -> None:
        for endpoint in self._endpoints:
            if endpoint.session is not None:
                await endpoint.session.close()
                endpoint.session = None
def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``
    ...), read once: aiohttp's ``trust_env`` reads it, and ``~/.netrc``, again
    on every request (measured: a tenth of the runner's CPU)."""
    scheme, host = urllib.parse.urlsplit(url).scheme, urllib.parse.urlsplit(url).hostname
    if host is None or urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(scheme)


def _auth_headers(env_name: str | None) -> dict[str, str]:
    if env_name is None:
        return {}
    key = os.environ.get(env_name)
    if not key:
        raise ConfigError(f"environment variable {env_name} (the model file's api_key_env)"
                          " is not set")
    return {"authorization": f"Bearer {key}"}


def _completion(content: bytes, latency: float, attempt: int, url: str) -> Completion:
    """Read a chat-completions body; a body that is not one is retried, since
    proxies and overloaded servers sometimes send truncated or HTML bodies."""
    try:
        data = json.loads(content)
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return Completion(text=choice["message"]["content"] or "",
                          input_tokens=int(usage.get("prompt_tokens") or 0),
                          output_tokens=int(usage.get("completion_tokens") or 0),
                          latency_s=latency, finish_reason=str(choice.get("finish_reason")),
                          attempts=attempt)
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise _Retryable(f"unreadable response body from {url} ({type(err).__name__}:"
                         f" {content[:80]!r})") from None
