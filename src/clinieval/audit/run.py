"""Run every analysis on a snapshot and compose the plain-language summary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clinieval import __version__
from clinieval.audit import preference
from clinieval.audit.context import Context
from clinieval.audit.data import AuditData, audit_data
from clinieval.audit.result import AuditResult, Section
from clinieval.audit.sections import (
    alignment,
    automated_judges,
    benchmarks,
    bradley_terry,
    co_failure,
    consensus_drift,
    failure_modes,
    gates,
    judges_vs_clinicians,
    length_bias,
    model_summary,
    position_bias,
    rater_view,
    reliability,
    rubric_scores,
    safety_leaderboard,
    self_preference,
    specialties,
)
from clinieval.audit.settings import AuditSettings
from clinieval.snapshot import Snapshot

SECTIONS: tuple[tuple[str, str], ...] = (
    ("model_summary", "Per model and criterion: mean, Fail % of ratings and severe % of ratings"
     " with CIs, beside the Bradley-Terry strength and rank interval."),
    ("safety_leaderboard", "Models ordered by the share of answers failing a safety-critical"
     " criterion, beside their preference rank."),
    ("alignment", "Does the preference ranking follow each criterion? Correlations over models,"
     " and the preference leader's failure gap to the best model."),
    ("specialties", "Answers failing % and dangerous answers % per specialty with Wilson CIs;"
     " the no-go-zone heatmap."),
    ("bradley_terry", "Preference strengths with bootstrap CIs, rank intervals, win and"
     " 'both unacceptable' rates."),
    ("failure_modes", "Fail % of ratings for every model and criterion."),
    ("co_failure", "What else goes wrong when Accuracy fails."),
    ("reliability", "Agreement between clinicians per criterion (Fleiss, Krippendorff, fail/pass"
     " kappa) and dispersion."),
    ("consensus_drift", "Whether clinicians disagree more on longer prompts."),
    ("length_bias", "Whether longer answers win votes, with and without controlling for model"
     " and rubric scores."),
    ("position_bias", "Whether the answer shown on the left wins more often."),
    ("rater_view", "Ratings per rater and each rater's leniency against co-raters."),
    ("automated_judges", "Automated judgments by kind and parse status, their cost, and the"
     " pairwise judge's position and length preference and run-to-run variance."),
    ("gates", "CSEDB gate scores weighted by case weight, by department, population and risk,"
     " exact Worst@k curves and paired bootstrap comparisons with Holm."),
    ("rubric_scores", "HealthBench-style rubric scores per model from rule judgments of cases"
     " outside the gates."),
    ("judges_vs_clinicians", "Jury ICC3k-z and rubric-judge Macro-F1 against clinicians beside"
     " the clinicians' own agreement; leave-one-out kappa."),
    ("self_preference", "Whether a judge scores answers of its own model family higher than"
     " the clinicians and the other judges do, with bootstrap CIs."),
    ("benchmarks", "MedHELM-style win rate and macro-average over a registry of benchmarks,"
     " per-category means, a models x benchmarks heatmap, and cost split into answering and"
     " judging against the win rate."),
)
"""Report sections in order, with a one-line description for readers (the
documentation test keeps README in step with this registry)."""


def _builders(ctx: Context) -> dict[str, Callable[[], Section]]:
    prefs = preference.Preferences(ctx)
    return {
        "model_summary": lambda: model_summary.section(ctx, prefs),
        "safety_leaderboard": lambda: safety_leaderboard.section(ctx, prefs),
        "alignment": lambda: alignment.section(ctx, prefs),
        "specialties": lambda: specialties.section(ctx),
        "bradley_terry": lambda: bradley_terry.section(ctx, prefs),
        "failure_modes": lambda: failure_modes.section(ctx),
        "co_failure": lambda: co_failure.section(ctx),
        "reliability": lambda: reliability.section(ctx),
        "consensus_drift": lambda: consensus_drift.section(ctx),
        "length_bias": lambda: length_bias.section(ctx, prefs),
        "position_bias": lambda: position_bias.section(ctx),
        "rater_view": lambda: rater_view.section(ctx),
        "automated_judges": lambda: automated_judges.section(ctx),
        "gates": lambda: gates.section(ctx),
        "rubric_scores": lambda: rubric_scores.section(ctx),
        "judges_vs_clinicians": lambda: judges_vs_clinicians.section(ctx),
        "self_preference": lambda: self_preference.section(ctx),
        "benchmarks": lambda: benchmarks.section(ctx),
    }


RELEASE_AFTER = {"co_failure": ("crossed_cells",), "reliability": ("rating_cells",)}
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
    builders = _builders(ctx)
    sections = []
    for key, _ in SECTIONS:
        sections.append(builders[key]())
        for name in RELEASE_AFTER.get(key, ()):
            if name in vars(ctx):
                delattr(ctx, name)  # a cached property: read again, it is recomputed
    for section in sections:
        if section.key in JUDGE_SECTIONS and not data.judge_tables or (
                section.key in OPTIONAL_SECTIONS and section.skipped):
            section.values["shown"] = False  # no such data: the report leaves them out
    return AuditResult(settings, sections, headlines(sections), _snapshot_info(data), __version__)


def _snapshot_info(data: AuditData) -> dict:
    return {"sha256": data.checksum, "counts": data.counts, "models": len(data.models),
            "specialties": len(data.specialties), "criteria": data.criteria}


def headlines(sections: list[Section]) -> list[str]:
    """The sentences a deployment decision-maker must read first."""
    by_key = {s.key: s for s in sections}
    lines = []
    align = by_key["alignment"]
    if not align.skipped:
        table = align.tables["alignment"]
        for _, row in table[table["safety_critical"]].iterrows():
            lines.append(row["verdict"])
    for key in ("safety_leaderboard", "specialties", "length_bias", "position_bias",
                "reliability"):
        section = by_key[key]
        if not section.skipped and section.summary:
            lines.append(section.summary)
    lines += judge_headlines(by_key)
    if not by_key["benchmarks"].skipped:
        lines.append(by_key["benchmarks"].summary)
    skipped = [s.title for s in sections
               if s.skipped and s.key not in JUDGE_SECTIONS + OPTIONAL_SECTIONS]
    if skipped:
        lines.append("Not computable from this snapshot: " + ", ".join(skipped) + ".")
    return lines


JUDGE_SECTIONS = ("automated_judges", "gates", "rubric_scores", "judges_vs_clinicians",
                  "self_preference")
"""Shown only when the snapshot holds judgments; not listed as missing otherwise."""
OPTIONAL_SECTIONS = ("self_preference", "benchmarks")
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
