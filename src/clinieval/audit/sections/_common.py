"""What every section module shares, and the spec by which a section
declares itself to the audit (:mod:`clinieval.audit.sections` lists the
specs in report order)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from clinieval.audit.result import Section, Skipped

R = TypeVar("R")
JUDGES_HEADLINE = 70
"""The headline rank of the judge sections' summaries (in registry order) and
of the sentence saying when judges and clinicians name different safest
models: sections ranked below it come before them, those above after."""


def viewer_href(base: str | None, **keys: str | None) -> str | None:
    """The link into the run viewer (``clinieval view``) filtered by ``keys``
    (model, judge, criterion, parse, score; URL-encoded in the fragment, as
    :mod:`clinieval.viewer` documents); None without a viewer."""
    from urllib.parse import quote, urlencode

    if base is None:
        return None
    folder = base if not base or base.endswith("/") else f"{base}/"
    page = base if base.endswith(".html") else f"{folder}index.html"
    pairs = [(k, v) for k, v in keys.items() if v is not None]
    # the address as given, with what a URL may not hold (spaces, quotes) encoded
    page = quote(page, safe=":/?@!$&'()*+,;=%~")
    return f"{page}#{urlencode(pairs, quote_via=quote, safe='')}"


@dataclass(frozen=True)
class Estimate:
    """A point estimate with the bounds of its interval (NaN when undefined)."""

    value: float
    lo: float
    hi: float


def run_section(key: str, title: str, computed: R | Skipped,
                present: Callable[[R], Section]) -> Section:
    """The presented section, or a skipped one that says why."""
    if isinstance(computed, Skipped):
        return Section(key, title, skipped=computed.reason)
    return present(computed)


def summary_headline(section: Section) -> list[str]:
    """A section's summary as a headline, unless skipped or empty."""
    return [section.summary] if not section.skipped and section.summary else []


@dataclass(frozen=True)
class SectionSpec:
    """What the audit needs to know about a section, declared by its module."""

    key: str
    title: str
    description: str
    """One line for readers (README keeps in step with the registry)."""
    build: Callable[..., Section]
    """``section(ctx)``, or ``section(ctx, prefs)`` when ``uses_preferences``."""
    uses_preferences: bool = False
    """Reads the shared Bradley-Terry fits of the votes."""
    needs_judgments: bool = False
    """Shown only when the snapshot holds judgments; not listed as missing otherwise."""
    optional: bool = False
    """Shown only when computed; not listed as missing otherwise."""
    releases: tuple[str, ...] = ()
    """Context caches that no later section reads, dropped once it is done."""
    headline: int | None = None
    """Rank of its headline sentences among the summary's (lower first; see
    :data:`JUDGES_HEADLINE`), None: none."""
    headline_lines: Callable[[Section], list[str]] = summary_headline
    """Its headline sentences, from the built section."""
