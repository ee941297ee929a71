"""Model providers: one async interface, model files, retries, replicas."""

from clinieval.providers.base import (
    PROVIDERS,
    CallFailed,
    Completion,
    Provider,
    provider_factory,
    register,
)
from clinieval.providers.failure import CauseCount, cause_of, failures_by_cause
from clinieval.providers.fleet import ReplicaReport
from clinieval.providers.modelfile import (
    GenerationSettings,
    ModelSpec,
    Prices,
    load_model_file,
    model_spec,
)
from clinieval.providers.preflight import EndpointProblem, preflight
from clinieval.providers.retry import RetryPolicy


def make_provider(spec: ModelSpec, **options) -> Provider:
    """The registered provider for ``spec.provider`` (its module imported now)."""
    from clinieval.errors import InputError

    factory = provider_factory(spec.provider)
    if factory is None:
        raise InputError(f"model {spec.id}", f"unknown provider {spec.provider!r}",
                         field="provider", expected=", ".join(sorted(PROVIDERS)))
    return factory(spec, **options)


__all__ = [
    "CallFailed",
    "CauseCount",
    "Completion",
    "EndpointProblem",
    "GenerationSettings",
    "ModelSpec",
    "PROVIDERS",
    "Prices",
    "Provider",
    "ReplicaReport",
    "RetryPolicy",
    "cause_of",
    "failures_by_cause",
    "load_model_file",
    "make_provider",
    "model_spec",
    "preflight",
    "provider_factory",
    "register",
]
