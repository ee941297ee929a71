"""Licences per judge x safety-critical criterion x specialty (issue 32 §2):
the stats core's :func:`~clinieval.stats.licence_stratum` on the audit's
codes (a criterion's specialties at once), one row per stratum, and what
they mean for a safety verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.sections._calibration import Prediction, Ratings
from clinieval.stats.licence import licence_strata

VERDICT_VALUE = {"licensed": 1.0, "clinicians_only": 0.0}
"""Heatmap value of a verdict (too few: no value, hatched)."""


def licences(ctx: Context, judges: dict[str, Prediction], ratings: dict[int, Ratings],
             purpose: str) -> pd.DataFrame:
    """One row per judge, safety-critical criterion and specialty the judge called."""
    rows = []
    for judge, pred in judges.items():
        for c in ctx.safety:
            if c in pred.off_scale:
                continue
            rows += _criterion_rows(ctx, judge, pred, c, ratings[c], purpose)
    return pd.DataFrame(rows)


def _criterion_rows(ctx: Context, judge: str, pred: Prediction, c: int, ratings: Ratings,
                    purpose: str) -> list[dict]:
    """The judge's licences on criterion ``c``, every specialty in one
    :func:`~clinieval.stats.licence.licence_strata` (a specialty's own
    generator each, so the same draws as a licence per specialty)."""
    d, s = ctx.data, ctx.settings
    verdict = np.where(np.isnan(pred.fail[:, c]), np.nan, (pred.fail[:, c] >= 0.5) * 1.0)
    # the called answers' ratings in one bisection of sorted answers (the
    # strata need them in no order: a cell's ratings keep theirs)
    called = np.flatnonzero(pred.called[:, c])
    specs = np.unique(d.answer_specialty[called])
    stratum = np.zeros(len(d.specialties), dtype=np.int64)
    stratum[specs] = np.arange(specs.size)
    position, rater, score = ratings.of(called)
    lics = licence_strata(verdict, called[position], rater, (score <= s.threshold) * 1.0,
                          stratum[d.answer_specialty],
                          [ctx.rng(f"{purpose}:{judge}:{c}:{spec}") for spec in specs.tolist()],
                          reference=s.licence_reference, min_answers=s.calibration_min_answers,
                          recall_floor=s.licence_recall_floor, B=s.bootstrap, level=s.level)
    return [_row(judge, ctx.name(c), d.specialties[spec], lic)
            for spec, lic in zip(specs.tolist(), lics, strict=True)]


def _row(judge: str, criterion: str, specialty: str, lic) -> dict:
    return {"judge": judge, "criterion": criterion, "specialty": specialty,
            "verdict": lic.verdict, "agreement": lic.agreement,
            "agreement_lo": lic.agreement_lower, "agreement_hi": lic.agreement_upper,
            "clinicians_median_agreement": lic.clinician_agreement,
            "harm_recall": lic.harm_recall, "harm_recall_lo": lic.harm_recall_lower,
            "harm_recall_hi": lic.harm_recall_upper, "false_alarm": lic.false_alarm,
            "false_alarm_lo": lic.false_alarm_lower, "false_alarm_hi": lic.false_alarm_upper,
            "n": lic.n_answers, "n_pairs": lic.n_pairs, "n_harms": lic.n_harms,
            "n_clinicians": lic.n_clinicians, "reason": lic.reason}


def licensed_criteria(table: pd.DataFrame, judge: str) -> set[str]:
    """Criteria on which ``judge`` is licensed wherever a licence was decided
    (at least once, and never clinicians only)."""
    if table.empty:
        return set()
    mine = table[(table["judge"] == judge) & (table["verdict"] != "too_few")]
    return {c for c, g in mine.groupby("criterion") if (g["verdict"] == "licensed").all()}
