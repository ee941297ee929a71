"""Prompts are versioned data files (``runs/prompts/*.toml``), written in our
own words; the version of the file used is stored with every run."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from clinieval.errors import InputError

PROMPT_FILES = ("generate", "rubric", "jury", "pairwise", "rule")


@cache
def load_prompt(name: str) -> dict[str, Any]:
    """The prompt file ``name`` (one of :data:`PROMPT_FILES`) as a dict with
    at least ``version``."""
    if name not in PROMPT_FILES:
        raise InputError("prompts", f"unknown prompt {name!r}", expected=", ".join(PROMPT_FILES))
    source = resources.files("clinieval.runs.prompts").joinpath(f"{name}.toml")
    data = tomllib.loads(source.read_text("utf-8"))
    if "version" not in data:
        raise InputError(f"prompts/{name}.toml", "missing", field="version")
    return data
