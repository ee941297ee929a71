"""Report sections, one module each, in two steps: ``compute`` turns the
audit context into a typed result (or :class:`Skipped` with the reason), and
``present`` turns that result into text, tables and figures. ``section``
runs both.

Each module declares itself in a :class:`~clinieval.audit.sections._common.SectionSpec`
(``SPEC``); :data:`REGISTRY` lists them in report order, and the audit
(:mod:`clinieval.audit.run`) derives everything else from it. A new section
is a module with its ``SPEC`` and one line here.
"""

from clinieval.audit.sections import (
    adjudications,
    alignment,
    automated_judges,
    benchmarks,
    bradley_terry,
    co_failure,
    consensus_drift,
    decisions,
    failure_modes,
    gates,
    judge_calibrated,
    judge_jury,
    judge_preferences,
    judge_repeats,
    judge_scores,
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
    targeted_weights,
)
from clinieval.audit.sections._common import SectionSpec

REGISTRY: tuple[SectionSpec, ...] = (
    model_summary.SPEC,
    judge_calibrated.SPEC,
    safety_leaderboard.SPEC,
    alignment.SPEC,
    specialties.SPEC,
    bradley_terry.SPEC,
    failure_modes.SPEC,
    co_failure.SPEC,
    reliability.SPEC,
    consensus_drift.SPEC,
    length_bias.SPEC,
    position_bias.SPEC,
    rater_view.SPEC,
    automated_judges.SPEC,
    gates.SPEC,
    rubric_scores.SPEC,
    judges_vs_clinicians.SPEC,
    judge_scores.SPEC,
    judge_jury.SPEC,
    judge_preferences.SPEC,
    judge_repeats.SPEC,
    self_preference.SPEC,
    benchmarks.SPEC,
    decisions.SPEC,
    targeted_weights.SPEC,
    adjudications.SPEC,
)
"""The report's sections in order."""
