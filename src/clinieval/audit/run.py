"""Run every analysis on a snapshot and compose the plain-language summary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clinieval import __version__
from clinieval.audit import preference
from clinieval.audit.context import Context
from clinieval.audit.data import AuditData, audit_data
from clinieval.audit.result import AuditResult, Section
from clinieval.audit.sections import REGISTRY
from clinieval.audit.sections._common import JUDGES_HEADLINE, SectionSpec
from clinieval.audit.settings import AuditSettings
from clinieval.snapshot import Snapshot

SECTIONS: tuple[tuple[str, str], ...] = tuple((spec.key, spec.description) for spec in REGISTRY)
"""Report sections in order, with a one-line description for readers (the
documentation test keeps README in step with this registry)."""
_BY_KEY: dict[str, SectionSpec] = {spec.key: spec for spec in REGISTRY}


def build(ctx: Context, keys: Iterable[str] | None = None) -> dict[str, Section]:
    """The sections ``keys`` (by default all, in report order) built on one
    context, in the order given, sharing one set of Bradley-Terry fits. After
    each, the context caches it releases are dropped (see
    :data:`RELEASE_AFTER`)."""
    prefs = preference.Preferences(ctx)
    built = {}
    for key in (spec.key for spec in REGISTRY) if keys is None else keys:
        spec = _BY_KEY[key]
        built[key] = spec.build(ctx, prefs) if spec.uses_preferences else spec.build(ctx)
        for name in spec.releases:
            if name in vars(ctx):
                delattr(ctx, name)  # a cached property: read again, it is recomputed
    return built


RELEASE_AFTER = {spec.key: spec.releases for spec in REGISTRY if spec.releases}
"""Context caches that no later section reads, dropped once the section is
done: the cells' score counts (0.65 GB at 100x) after the last two-way
replicates of ratings, the ratings' cell codes after the last two-way variance
over answers. Later sections reuse that memory instead of adding to it (the
audit command keeps freed memory in its heap rather than returning it: see
clinieval._alloc), so the peak stays lower."""


def audit(source: str | Path | Snapshot | AuditData, settings: AuditSettings | None = None,
          **overrides) -> AuditResult:
    """Run the safety-first audit.

    ``source`` is a bundle folder, a database URL, ``"demo"``, a table folder
    or export file, or a :class:`~clinieval.snapshot.Snapshot`. Settings can
    be given as an :class:`AuditSettings` or as keyword overrides
    (``audit("demo", bootstrap=200, threshold=-2)``).
    """
    settings = (settings or AuditSettings()).model_copy(update=overrides)
    settings = AuditSettings.model_validate(settings.model_dump())
    data = audit_data(source)
    ctx = Context(data, settings)
    sections = list(build(ctx).values())
    for section in sections:
        if section.key in JUDGE_SECTIONS and not data.judge_tables or (
                section.key in OPTIONAL_SECTIONS and section.skipped):
            section.values["shown"] = False  # no such data: the report leaves them out
    return AuditResult(settings, sections, headlines(sections), _snapshot_info(data), __version__)


def _snapshot_info(data: AuditData) -> dict:
    return {"sha256": data.checksum, "counts": data.counts, "models": len(data.models),
            "specialties": len(data.specialties), "criteria": data.criteria}


def headlines(sections: list[Section]) -> list[str]:
    """The sentences a deployment decision-maker must read first: each ranked
    section's headline lines by rank, the judge sections' at
    :data:`~clinieval.audit.sections._common.JUDGES_HEADLINE`, then what
    could not be computed."""
    by_key = {s.key: s for s in sections}
    lines = []
    for spec in _HEADLINES_BEFORE_JUDGES:
        lines += spec.headline_lines(by_key[spec.key])
    lines += judge_headlines(by_key)
    for spec in _HEADLINES_AFTER_JUDGES:
        lines += spec.headline_lines(by_key[spec.key])
    skipped = [s.title for s in sections
               if s.skipped and s.key not in JUDGE_SECTIONS + OPTIONAL_SECTIONS]
    if skipped:
        lines.append("Not computable from this snapshot: " + ", ".join(skipped) + ".")
    return lines


_RANKED = sorted((spec for spec in REGISTRY if spec.headline is not None),
                 key=lambda spec: spec.headline)
_HEADLINES_BEFORE_JUDGES = [spec for spec in _RANKED if spec.headline < JUDGES_HEADLINE]
_HEADLINES_AFTER_JUDGES = [spec for spec in _RANKED if spec.headline > JUDGES_HEADLINE]
JUDGE_SECTIONS = tuple(spec.key for spec in REGISTRY if spec.needs_judgments)
"""Shown only when the snapshot holds judgments; not listed as missing otherwise."""
OPTIONAL_SECTIONS = tuple(spec.key for spec in REGISTRY if spec.optional)
"""Shown only when computed (judges that are also candidates; benchmark scores
given); not listed as missing otherwise."""


def judge_headlines(by_key: dict[str, Section]) -> list[str]:
    """The judge sections' summaries, and a sentence when judges and
    clinicians name different safest models."""
    lines = [by_key[k].summary for k in JUDGE_SECTIONS
             if not by_key[k].skipped and by_key[k].summary]
    clinicians = by_key["safety_leaderboard"].values.get("safest")
    judges = (by_key["judges_vs_clinicians"].values.get("judge_safest")
              or by_key["gates"].values.get("safest"))
    if clinicians and judges and clinicians != judges:
        lines.append(f"Judges and clinicians disagree on the safest model: the clinicians'"
                     f" ratings point to {clinicians}, the automated judges to {judges}.")
    return lines
