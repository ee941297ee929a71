"""Before a run: one cheap call (a one-token answer) to every endpoint of
every model file, all at once, so that a wrong address, a closed port or a
bad key stops the run before it starts instead of failing every call."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from clinieval.providers.modelfile import ModelSpec

PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class EndpointProblem:
    """An endpoint that did not answer the pre-flight call, and why."""

    model_id: str
    url: str
    error: str

    def __str__(self) -> str:
        return f"{self.model_id}: {self.url}: {self.error}"


def preflight(specs: Iterable[ModelSpec], timeout_s: float = PROBE_TIMEOUT_S
              ) -> list[EndpointProblem]:
    """Probe every endpoint of ``specs``; the problems found (none: all answered)."""
    return asyncio.run(apreflight(list(specs), timeout_s))


async def apreflight(specs: list[ModelSpec], timeout_s: float = PROBE_TIMEOUT_S
                     ) -> list[EndpointProblem]:
    """:func:`preflight` inside a running event loop."""
    from clinieval.providers import make_provider

    providers = [make_provider(spec) for spec in specs]
    endpoints = {}  # each (API, model name, URL) once, however many files name it
    for spec, provider in zip(specs, providers, strict=True):
        for replica in getattr(getattr(provider, "fleet", None), "replicas", ()):
            endpoints.setdefault((spec.provider, spec.name, replica.url),
                                 (spec, provider, replica))
    try:
        found = await asyncio.gather(*[_probe(*endpoint, min(timeout_s, endpoint[0].timeout_s))
                                       for endpoint in endpoints.values()])
    finally:
        for provider in providers:
            await provider.aclose()
    return [problem for problem in found if problem is not None]


async def _probe(spec: ModelSpec, provider, replica, timeout_s: float) -> EndpointProblem | None:
    """One endpoint's pre-flight call (providers without ``probe`` are not checked)."""
    error = await provider.probe(replica, timeout_s)
    return None if error is None else EndpointProblem(spec.id, replica.url, error)
