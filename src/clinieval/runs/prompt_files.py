"""Prompts are versioned data files, written in our own words: the judges'
and the generator's TOML files (``runs/prompts/*.toml``) and the benchmarks'
Jinja2 templates (``runs/prompts/*.j2``); the version of the file used is
stored with every run.

A user overrides any of them with a folder of templates (``--prompts DIR``,
or a ``prompts/`` folder beside the model files): a file there with the same
name replaces the bundled one, whole. Every template has a name and the
SHA-256 of its text (:func:`prompt_template`, :func:`template_identity`), so
what produced a judgment can be recorded with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import tomllib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from clinieval.errors import InputError

PROMPT_FILES = ("generate", "rubric", "jury", "pairwise", "rule")
TEMPLATE_SUFFIX = ".j2"
FOLDER_NAME = "prompts"
"""The folder of templates looked for beside the model files."""

_FOLDER: ContextVar[Path | None] = ContextVar("clinieval_prompt_folder", default=None)


@dataclass(frozen=True)
class PromptTemplate:
    """One template as used: its name, where it came from (``bundled`` or
    the user's file), its text and that text's SHA-256."""

    name: str
    source: str
    text: str
    sha256: str

    @property
    def bundled(self) -> bool:
        return self.source == "bundled"


def prompt_folder() -> Path | None:
    """The user's template folder in effect, if any."""
    return _FOLDER.get()


@contextlib.contextmanager
def use_prompt_folder(folder: str | Path | None) -> Iterator[None]:
    """Templates in ``folder`` override the bundled ones while the block runs
    (jobs built inside it read their prompts from there)."""
    if folder is not None and not Path(folder).is_dir():
        raise InputError(str(folder), "the prompts folder does not exist",
                         expected="a folder of *.toml and *.j2 templates")
    token = _FOLDER.set(None if folder is None else Path(folder).resolve())
    try:
        yield
    finally:
        _FOLDER.reset(token)


def folder_beside(model_files: list[Path]) -> Path | None:
    """The ``prompts/`` folder beside the first model file that has one."""
    for path in model_files:
        candidate = Path(path).parent / FOLDER_NAME
        if candidate.is_dir():
            return candidate
    return None


def _file_name(name: str) -> str:
    return name if name.endswith(TEMPLATE_SUFFIX) else f"{name}.toml"


@cache
def _read(file_name: str, folder: Path | None) -> PromptTemplate:
    if folder is not None and (folder / file_name).is_file():
        path = folder / file_name
        try:
            text = path.read_text("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(str(path), f"not UTF-8 text: {err}") from None
        source = str(path)
    else:
        bundled = resources.files("clinieval.runs.prompts").joinpath(file_name)
        if not bundled.is_file():
            where = f" (nor in {folder})" if folder else ""
            raise InputError(file_name, f"no such template{where}",
                             expected=", ".join(bundled_templates()))
        text, source = bundled.read_text("utf-8"), "bundled"
    return PromptTemplate(file_name.removesuffix(".toml"), source, text,
                          hashlib.sha256(text.encode()).hexdigest())


def prompt_template(name: str, folder: str | Path | None = None) -> PromptTemplate:
    """The template ``name``: a prompt file of :data:`PROMPT_FILES`, or a
    Jinja2 template ``NAME.j2``; the user's (``folder``, else the one in
    effect) when it has one, else the bundled one."""
    if not name.endswith(TEMPLATE_SUFFIX) and name not in PROMPT_FILES:
        raise InputError("prompts", f"unknown prompt {name!r}", expected=", ".join(PROMPT_FILES))
    chosen = Path(folder).resolve() if folder is not None else prompt_folder()
    return _read(_file_name(name), chosen)


def template_identity(name: str, folder: str | Path | None = None) -> tuple[str, str]:
    """``(name, sha256)`` of the template a job would use now."""
    template = prompt_template(name, folder)
    return template.name, template.sha256


def bundled_templates() -> list[str]:
    files = resources.files("clinieval.runs.prompts")
    return sorted(p.name for p in files.iterdir()
                  if p.name.endswith((".toml", TEMPLATE_SUFFIX)))


def load_prompt(name: str) -> dict[str, Any]:
    """The prompt file ``name`` (one of :data:`PROMPT_FILES`) as a dict with
    at least ``version``; the user's copy when a prompts folder is in effect
    and holds one. Its name and hash are under ``template`` (a
    :class:`PromptTemplate`)."""
    template = prompt_template(name)
    return _parsed(template)


@cache
def _parsed(template: PromptTemplate) -> dict[str, Any]:
    where = template.source if not template.bundled else f"prompts/{template.name}.toml"
    try:
        data = tomllib.loads(template.text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(where, f"not valid TOML: {err}") from None
    if "version" not in data:
        raise InputError(where, "missing", field="version")
    bundled = _bundled_keys(template.name)
    missing = [k for k in bundled if k not in data]
    if missing:
        raise InputError(where, "an override must have every key the bundled prompt has",
                         field=missing[0])
    return data | {"template": template}


@cache
def _bundled_keys(name: str) -> tuple[str, ...]:
    text = resources.files("clinieval.runs.prompts").joinpath(f"{name}.toml").read_text("utf-8")
    return tuple(tomllib.loads(text))
