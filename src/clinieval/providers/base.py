"""The provider interface: one async ``generate`` call per chat completion.

A provider turns ``(messages, settings)`` into a :class:`Completion` or raises
:class:`CallFailed` once its retries are spent. Providers are registered by
name so a model file can say which one serves it.
"""

from __future__ import annotations

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


class CallFailed(ClinievalError):
    """A call still failed after every retry; ``attempts`` counts the tries."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class Provider(Protocol):
    """Anything that answers chat messages; ``concurrency`` is how many calls
    it can usefully have in flight (summed over its endpoints)."""

    concurrency: int

    async def generate(self, messages: Sequence[Message], settings: Mapping[str, Any]
                       ) -> Completion: ...

    async def aclose(self) -> None: ...


PROVIDERS: dict[str, Callable[..., Provider]] = {}
"""Provider factories by the name a model file uses in ``provider``."""


def register(name: str):
    """Class decorator: make a provider available to model files under ``name``."""

    def add(factory):
        PROVIDERS[name] = factory
        return factory

    return add
