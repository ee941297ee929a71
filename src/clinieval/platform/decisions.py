"""A study's gates as decisions now: per gate and cell, pass, fail or open by
an anytime-valid confidence sequence (issue 33), on the study's current data.

The per-cell core is :mod:`clinieval.platform.cell_decisions` (the audit's
``decisions`` section uses it on an export; its names are re-exported
here). :func:`compute_study` runs it on a study's current data, with the
study's judge where its judgments are licensed
(:mod:`clinieval.platform.decision_view` caches that for the pages and the
API). Apart from the core because finding the judge uses the audit's judge
machinery, whose package holds the ``decisions`` section, which uses the core.
"""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.platform.cell_decisions import (
    CERTIFIED_RULES,
    CLINICIANS_ONLY,
    OPEN,
    CellJudge,
    CellStream,
    DecisionJudge,
    cell_decision,
    cell_streams,
    decision_rows,
    study_line,
)
from clinieval.platform.config import StudyConfig

__all__ = ["CERTIFIED_RULES", "CLINICIANS_ONLY", "OPEN", "CellJudge", "CellStream",
           "DecisionJudge", "cell_decision", "cell_streams", "compute_study", "decision_rows",
           "study_line"]

VERDICT_RULE = ("betting confidence sequence at alpha/2 (prediction-powered where a judge is"
                " licensed) widened by the rater margin at alpha/2")


def compute_study(engine: sa.Engine, cfg: StudyConfig, certify: bool,
                  forecast: bool = True) -> dict:
    """The study's decisions now, JSON-ready (certificates with ``certify``,
    ratings still expected with ``forecast``)."""
    from clinieval.audit.context import Context
    from clinieval.audit.data import from_snapshot
    from clinieval.audit.failure import rule_words
    from clinieval.audit.sections._decision_judges import decision_judge
    from clinieval.audit.settings import AuditSettings
    from clinieval.platform.study_export import study_snapshot

    gates = [g.model_dump() for g in cfg.gates]
    settings = AuditSettings()
    base = {"gates": gates, "rule": rule_words(settings.response_rule, settings.threshold),
            "verdict_rule": VERDICT_RULE}
    snap = study_snapshot(engine, cfg.study_id)
    if not cfg.gates or snap["ratings"].num_rows == 0:
        return {**base, "decisions": [], "summary": study_line([]), "open": 0}
    ctx = Context(from_snapshot(snap), settings)
    rows = decision_rows(ctx, cfg.gates, certify, forecast, decision_judge(ctx))
    return {**base, "decisions": rows, "summary": study_line(rows),
            "open": sum(r["verdict"] == OPEN for r in rows)}
