"""The OpenAI-compatible chat-completions provider (vLLM, llama.cpp's server,
Ollama, hosted APIs), on httpx.

Replicas are used in turn; each base URL has its own limit of calls in
flight. Rate limits, server errors, broken connections, timeouts and
unreadable bodies are retried with jittered exponential backoff, honouring
``Retry-After``. The API key is read from the environment variable the model
file names and only ever placed in the request header.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import random
import ssl
import sys
import time
from collections.abc import Mapping, Sequence
from itertools import count
from typing import Any

import httpx

from clinieval.errors import ConfigError
from clinieval.providers.base import CallFailed, Completion, Message, register
from clinieval.providers.modelfile import ModelSpec
from clinieval.providers.retry import RETRY_STATUSES, RetryPolicy, parse_retry_after

if importlib.util.find_spec("sniffio") is None:
    # httpcore tries ``import sniffio`` on every request; when it is not
    # installed each failed import searches sys.path again (measured: a third
    # of the runner's CPU). Recording it as absent once makes that check free.
    sys.modules["sniffio"] = None  # type: ignore[assignment]

CONNECTIONS_PER_CLIENT = 2
"""httpx's pool looks at every one of its connections on each request, so
its cost grows with the pool; several small clients per endpoint keep it flat."""


class _Retryable(Exception):
    """One try failed in a way another try may not; carries the server's wait."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class _Endpoint:
    def __init__(self, base_url: str, concurrency: int, headers: dict[str, str],
                 timeout: httpx.Timeout, tls: ssl.SSLContext) -> None:
        self.url = f"{base_url}/chat/completions"
        self.slots = asyncio.Semaphore(concurrency)
        per_client = min(concurrency, CONNECTIONS_PER_CLIENT)
        limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client)
        self.clients = [httpx.AsyncClient(headers=headers, timeout=timeout, limits=limits,
                                          verify=tls)
                        for _ in range(math.ceil(concurrency / per_client))]
        self._turn = count()

    def client(self) -> httpx.AsyncClient:
        return self.clients[next(self._turn) % len(self.clients)]


@register("openai")
class OpenAICompatible:
    """Chat completions over HTTP for one model file."""

    def __init__(self, spec: ModelSpec, *, policy: RetryPolicy | None = None,
                 seed: int | None = None) -> None:
        self.spec = spec
        self.policy = policy or RetryPolicy(max_attempts=spec.max_attempts)
        self.concurrency = spec.concurrency * len(spec.base_urls)
        headers = _auth_headers(spec.api_key_env) | {"content-type": "application/json"}
        timeout = httpx.Timeout(spec.timeout_s, connect=min(10.0, spec.timeout_s))
        tls = ssl.create_default_context()  # one for all clients: loading CAs is slow
        self._endpoints = [_Endpoint(url, spec.concurrency, headers, timeout, tls)
                           for url in spec.base_urls]
        self._turn = count()
        self._rng = random.Random(seed)

    async def generate(self, messages: Sequence[Message], settings: Mapping[str, Any]
                       ) -> Completion:
        body = json.dumps({"model": self.spec.name, "messages": list(messages), **settings})
        for attempt in range(1, self.policy.max_attempts + 1):
            endpoint = self._endpoints[next(self._turn) % len(self._endpoints)]
            try:
                async with endpoint.slots:
                    return await self._try(endpoint, body.encode(), attempt)
            except _Retryable as err:
                if attempt == self.policy.max_attempts:
                    raise CallFailed(f"{err} (after {attempt} tries)", attempt) from None
                await asyncio.sleep(self.policy.wait_s(attempt, err.retry_after_s, self._rng))
        raise AssertionError("unreachable: the loop returns or raises")

    async def _try(self, endpoint: _Endpoint, body: bytes, attempt: int) -> Completion:
        start = time.perf_counter()
        try:
            response = await endpoint.client().post(endpoint.url, content=body)
        except httpx.TimeoutException as err:
            raise _Retryable(f"timeout ({type(err).__name__}) at {endpoint.url}") from None
        except httpx.TransportError as err:
            raise _Retryable(f"connection error at {endpoint.url}: {err!r}") from None
        latency = time.perf_counter() - start
        if response.status_code in RETRY_STATUSES:
            wait = parse_retry_after(response.headers.get("retry-after"), time.time())
            raise _Retryable(f"HTTP {response.status_code} from {endpoint.url}", wait)
        if response.status_code != 200:
            raise CallFailed(f"HTTP {response.status_code} from {endpoint.url}:"
                             f" {response.text[:300]}", attempt)
        return _completion(response.content, latency, attempt, endpoint.url)

    async def aclose(self) -> None:
        for endpoint in self._endpoints:
            for client in endpoint.clients:
                await client.aclose()


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
