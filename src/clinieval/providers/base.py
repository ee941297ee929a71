"""The provider interface: one async ``generate`` call per chat completion.

A provider turns ``(messages, settings)`` into a :class:`Completion` or raises
:class:`CallFailed` once its retries are spent. Providers are registered by
name so a model file can say which one serves it; the built-in ones are
listed by module path and imported only when a model file names them (as
inspect_ai's ``@modelapi`` does), so a run against one API never loads the
code of another.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clinieval.errors import ClinievalError

Message = Mapping[str, str]
"""A chat message: ``{"role": ..., "content": ...}``."""


@dataclass(frozen=True)
class Completion:
    """What one successful call returned, with what it cost in tokens and time."""

    text: str
    input_tokens: int
    output_tokens: int
    latency_s: float
    finish_reason: str
    attempts: int = 1
    endpoint: str = ""
    """The base URL of the replica that answered, when the provider knows it."""


class CallFailed(ClinievalError):
    """A call still failed after every retry; ``attempts`` counts the tries and
    ``cause`` names the kind of the last failure (``failure.CAUSES``)."""

    def __init__(self, message: str, attempts: int, cause: str = "error") -> None:
        super().__init__(message)
        self.attempts = attempts
        self.cause = cause
        self.endpoint: str | None = None
        """The base URL of the replica that last failed, when known."""


class Provider(Protocol):
    """Anything that answers chat messages; ``concurrency`` is how many calls
    the runner should keep asking it at once: the calls it can usefully have
    in flight (a model file's ``max_in_flight``, by default its endpoints'
    ceilings added up), plus any it keeps waiting to take the place of calls
    on a replica it suspects is lost."""

    concurrency: int

    async def generate(self, messages: Sequence[Message], settings: Mapping[str, Any]
                       ) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class LazyProvider:
    """A provider known by the module that defines it, imported on first use."""

    target: str
    """``"package.module:Class"``."""
    default_base_url: str | None = None

    def load(self) -> Callable[..., Provider]:
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)


PROVIDERS: dict[str, LazyProvider | Callable[..., Provider]] = {
    "openai": LazyProvider("clinieval.providers.openai_compat:OpenAICompatible"),
    "anthropic": LazyProvider("clinieval.providers.anthropic:Anthropic",
                              "https://api.anthropic.com/v1"),
    "gemini": LazyProvider("clinieval.providers.gemini:Gemini",
                           "https://generativelanguage.googleapis.com/v1beta"),
}
"""Provider factories (or where to import them from) by the name a model
file uses in ``provider``."""


def register(name: str):
    """Class decorator: make a provider available to model files under ``name``."""

    def add(factory):
        entry = PROVIDERS.get(name)
        declared = isinstance(entry, LazyProvider) and entry.target == (
            f"{factory.__module__}:{factory.__qualname__}")
        if not declared:  # the lazy entry (and its default URL) already leads here
            PROVIDERS[name] = factory
        return factory

    return add


def provider_factory(name: str) -> Callable[..., Provider] | None:
    """The factory registered as ``name``, its module imported now if need be."""
    entry = PROVIDERS.get(name)
    return entry.load() if isinstance(entry, LazyProvider) else entry


def default_base_url(name: str) -> str | None:
    entry = PROVIDERS.get(name)
    return entry.default_base_url if isinstance(entry, LazyProvider) else None
