"""One settings object: ``CLINIEVAL_*`` environment variables (and ``.env``),
plus the conventional ``DATABASE_URL``. A bad value fails at start, naming
the variable."""

from __future__ import annotations

from functools import lru_cache

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from clinieval.errors import ConfigError

DEFAULT_DATABASE_URL = "sqlite:///clinieval.db"


class Settings(BaseSettings):
    """Runtime settings from the environment (``CLINIEVAL_*``, ``DATABASE_URL``, ``.env``)."""

    model_config = SettingsConfigDict(env_prefix="CLINIEVAL_", env_file=".env", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        validation_alias=AliasChoices("DATABASE_URL", "CLINIEVAL_DATABASE_URL"),
        description="SQLAlchemy URL of the database (SQLite file by default, or PostgreSQL).",
    )
    pseudonym_salt: str = Field(
        default="clinieval-default-salt",
        description="Secret salt for pseudonymous rater ids in exports; set your own per"
        " deployment.",
    )
    seed: int = Field(default=20260301, description="Default seed of the audit's resampling"
                      " (the audit's --seed when not given).")

    @field_validator("database_url")
    @classmethod
    def _known_backend(cls, url: str) -> str:
        if not url.startswith(("sqlite", "postgresql")):
            raise ValueError("must start with sqlite:// or postgresql://")
        return url


def _env_name(field: str) -> str:
    return "DATABASE_URL" if field == "database_url" else f"CLINIEVAL_{field.upper()}"


@lru_cache
def get_settings() -> Settings:
    """The settings, read once; an invalid value raises ConfigError naming the variable."""
    try:
        return Settings()
    except ValidationError as err:
        first = err.errors()[0]
        name = _env_name(str(first["loc"][0]))
        raise ConfigError(f"setting {name} is invalid: {first['msg']}") from None
