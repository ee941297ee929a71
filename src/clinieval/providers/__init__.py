"""Model providers: one async interface, model files, retries."""

from clinieval.providers.base import PROVIDERS, CallFailed, Completion, Provider, register
from clinieval.providers.modelfile import (
    GenerationSettings,
    ModelSpec,
    Prices,
    load_model_file,
    model_spec,
)
from clinieval.providers.openai_compat import OpenAICompatible
from clinieval.providers.retry import RetryPolicy


def make_provider(spec: ModelSpec, **options) -> Provider:
    """The registered provider for ``spec.provider``."""
    from clinieval.errors import InputError

    factory = PROVIDERS.get(spec.provider)
    if factory is None:
        raise InputError(f"model {spec.id}", f"unknown provider {spec.provider!r}",
                         field="provider", expected=", ".join(sorted(PROVIDERS)))
    return factory(spec, **options)


__all__ = [
    "CallFailed",
    "Completion",
    "GenerationSettings",
    "ModelSpec",
    "OpenAICompatible",
    "PROVIDERS",
    "Prices",
    "Provider",
    "RetryPolicy",
    "load_model_file",
    "make_provider",
    "model_spec",
    "register",
]
