"""Judge-calibrated safety (issue 32): what the clinicians would report on
every judged answer, estimated from a judge's scores corrected by the
clinicians' ratings of the answers both rated (PPI++ with power tuning, a
two-way rater x answer bootstrap of the whole estimator: see
:mod:`clinieval.stats.calibrated`), beside the clinicians alone; and a
licence per judge x safety-critical criterion x specialty saying where a
judge may stand in for clinicians (:mod:`clinieval.stats.licence`).

Cells without enough doubly-rated answers, or where the judge cannot help
(never overlapping, constant, every call unparsed, one clinician), get a
line saying why instead of a number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.judged import judged
from clinieval.audit.result import Figure, Heatmap, Section
from clinieval.audit.sections._calibration import (
    ANY_SAFETY,
    MEASURES,
    JudgeFrame,
    Prediction,
    any_safety,
    choose_judge,
    estimates,
    judge_frame,
    measure,
    prediction,
    ratings_draw,
    ratings_of,
    recorded,
)
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections._licences import VERDICT_VALUE, licences, licensed_criteria

KEY, TITLE = "judge_calibrated", "Judge-calibrated safety"
LICENCES_CSV = "licences.csv"


@dataclass(frozen=True)
class Calibrated:
    """The judge used, the estimates per model x criterion and per model x
    specialty, and the licences of every judge."""

    judge: str
    by_criterion: pd.DataFrame
    by_specialty: pd.DataFrame
    licences: pd.DataFrame
    judge_alone: pd.DataFrame  # the judge's own Fail % per model and criterion


def compute(ctx: Context) -> Calibrated | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    if not ctx.safety:
        return Skipped(ctx.why_no_safety)
    frame = judge_frame(ctx, data)
    judge = choose_judge(frame, ctx.settings.calibration_judge)
    if judge is None:
        return Skipped(_why_no_judge(frame, ctx.settings.calibration_judge))
    preds = {j: prediction(ctx, frame, j) for j in frame.labels}
    why = _why_unusable(ctx, preds[judge], judge)
    if why:
        return Skipped(why)
    pred, ratings = preds[judge], _Ratings(ctx)
    by_criterion, by_specialty = _tables(ctx, pred, ratings)
    return Calibrated(judge, by_criterion, by_specialty,
                      licences(ctx, preds, ratings.one, f"{KEY}:licence"),
                      _judge_alone(ctx, pred))


class _Ratings:
    """The safety-critical criteria's ratings, each sorted once per audit."""

    def __init__(self, ctx: Context) -> None:
        self.one = {c: ratings_of(ctx, [c]) for c in ctx.safety}
        self.any = ratings_of(ctx, ctx.safety)


def _why_no_judge(frame: JudgeFrame, wanted: str) -> str:
    if frame.empty:
        return ("no rubric or jury judgment scores a rubric criterion, so no judge can be"
                " calibrated against the clinicians.")
    return (f"no judge named {wanted!r}; the judges are "
            + ", ".join(frame.labels) + " (--calibration-judge).")


def _why_unusable(ctx: Context, pred: Prediction, judge: str) -> str | None:
    """Why the judge cannot calibrate any safety-critical criterion, or None."""
    safety = ctx.safety
    if not pred.called[:, safety].any():
        return f"the {judge} scored no safety-critical criterion."
    if all(c in pred.off_scale for c in safety if pred.called[:, c].any()):
        return (f"the {judge}'s scores are on another scale than the clinicians'"
                " criterion, so they cannot be mapped to it.")
    if np.isnan(pred.fail[:, safety][pred.called[:, safety]]).all():
        return f"every {judge} judgment of a safety-critical criterion is unparsed."
    rated = np.zeros(ctx.data.n_answers, dtype=bool)
    rated[ratings_of(ctx, safety).answer] = True
    if not (rated[:, None] & np.isfinite(pred.fail[:, safety])).any():
        return (f"the {judge} and the clinicians never rated the same answer on a"
                " safety-critical criterion: nothing to calibrate with.")
    return None


def _usable(pred: Prediction, c: int) -> bool:
    return c not in pred.off_scale


def _tables(ctx: Context, pred: Prediction, ratings: _Ratings
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The estimates per model x criterion and per model x specialty. Every
    cell (each criterion's models, their specialties, every measure, and
    any-safety's) shares one two-way draw of the raters and answers of the
    safety-critical ratings; a model's sums are those of its specialties
    added up."""
    d = ctx.data
    n_spec = max(len(d.specialties), 1)
    leaf_of = d.answer_model.astype(np.int64) * n_spec + d.answer_specialty
    worst, any_called = any_safety(ctx, pred)
    models = [[m * n_spec + g for g in range(n_spec)] for m in range(d.n_models)]
    specs = [(m, int(g)) for m in range(d.n_models)
             for g in np.unique(d.answer_specialty[(d.answer_model == m) & any_called])]
    per_spec = [[m * n_spec + g] for m, g in specs]
    draw = ratings_draw(ctx, ratings.any, f"{KEY}:draw")
    usable = [c for c in ctx.safety if _usable(pred, c)]
    measures = {}
    for c in usable:
        leaf = np.where(pred.called[:, c], leaf_of, -1)
        for key in MEASURES:
            predicted = (pred.mean if key == "mean_score" else pred.fail)[:, c]
            chosen = models + (per_spec if key == "fail_pct" else [])
            measures[f"{key}:{c}"] = measure(ctx, key, predicted, ratings.one[c], leaf, chosen,
                                             ctx.answer_fail[:, c], f"{KEY}:{key}:{c}")
    measures["failing_pct:any"] = measure(
        ctx, "failing_pct", worst, ratings.any, np.where(any_called, leaf_of, -1),
        models + per_spec, ctx.answer_dangerous, f"{KEY}:dangerous")
    rows = estimates(ctx, measures, draw)
    found: dict[tuple, dict] = {}
    for c in usable:
        for key in MEASURES:
            got = rows[f"{key}:{c}"]
            found.update({(key, c, m): r for m, r in enumerate(got[:d.n_models])})
            found.update({(key, c, *k): r for k, r in zip(specs, got[d.n_models:],
                                                           strict=False)})
    got = rows["failing_pct:any"]
    found.update({("any", m): r for m, r in enumerate(got[:d.n_models])})
    found.update({("any", *k): r for k, r in zip(specs, got[d.n_models:], strict=True)})
    by_criterion, by_specialty = [], []
    for m in range(d.n_models):
        name = d.model_names[m]
        for c in (c for c in ctx.safety if _usable(pred, c)):
            by_criterion += [{"model": name, "criterion": ctx.name(c), "measure": MEASURES[k],
                              **found[(k, c, m)]} for k in MEASURES]
        by_criterion.append(_any(name, found[("any", m)]))
    for m, g in specs:
        name, spec = d.model_names[m], d.specialties[g]
        by_specialty.append({"specialty": spec, **_any(name, found[("any", m, g)])})
        by_specialty += [{"specialty": spec, "model": name, "criterion": ctx.name(c),
                          "measure": MEASURES["fail_pct"], **found[("fail_pct", c, m, g)]}
                         for c in ctx.safety if _usable(pred, c)]
    return pd.DataFrame(by_criterion), pd.DataFrame(by_specialty)


def _any(model: str, row: dict) -> dict:
    return {"model": model, "criterion": ANY_SAFETY, "measure": "dangerous answers %", **row}


def _judge_alone(ctx: Context, pred: Prediction) -> pd.DataFrame:
    rows = [{"model": ctx.data.model_names[m], "criterion": ctx.name(c),
             "judge_fail_pct": 100 * float(np.nanmean(f)) if np.isfinite(f).any() else np.nan}
            for m in range(ctx.data.n_models) for c in ctx.safety
            for f in [pred.fail[ctx.data.answer_model == m, c]]]
    return pd.DataFrame(rows)


def present(result: Calibrated, ctx: Context) -> Section:
    tables = {name: frame for name, frame in (
        ("by_criterion", result.by_criterion), ("by_specialty", result.by_specialty),
        ("licences", result.licences)) if len(frame)}
    figures = [_heatmap(result.licences, ctx)] if len(result.licences) else []
    verdicts = _verdict_sentences(result)
    values = {"judge": result.judge, "csv": {LICENCES_CSV: "licences"} if len(result.licences)
              else {}, "verdict_changes": verdicts, **_counts(result)}
    return Section(KEY, TITLE, _summary(result, ctx, verdicts), tables, figures, values)


def _counts(result: Calibrated) -> dict:
    est = result.by_criterion
    done = est[est["why_no_estimate"] == ""] if len(est) else est
    verdicts = result.licences["verdict"].value_counts().to_dict() if len(result.licences) else {}
    return {"cells": len(est), "calibrated_cells": len(done),
            "median_gain": float(done["gain"].median()) if len(done) else None,
            "licences": {k: int(v) for k, v in sorted(verdicts.items())}}


def _summary(result: Calibrated, ctx: Context, verdicts: list[str]) -> str:
    s, v = ctx.settings, _counts(result)
    text = (f"Clinicians' safety figures calibrated by the {result.judge}'s scores on every"
            f" judged answer (PPI++, λ tuned per cell; {s.level:.0%} two-way rater x answer"
            f" bootstrap of the whole estimator, B = {s.bootstrap}): {v['calibrated_cells']} of"
            f" {v['cells']} model x criterion cells have an estimate")
    if v["median_gain"] is not None:
        text += (f"; the median cell is worth {v['median_gain']:.2f}x its clinician-rated"
                 " answers (effective clinician sample size)")
    known = recorded(ctx)
    if known is not None:
        text += ("; the study ran with targeted assignment, so each clinician-rated answer is"
                 " weighted by the inverse of the probability its lease recorded")
        unknown = int(np.unique(ctx.data.rating_answer[~known[ctx.data.rating_answer]]).size)
        if unknown:
            text += (f" ({unknown} rated answers without a recorded probability count as"
                     " unrated)")
    lic = v["licences"]
    text += (f". Licences (agreement {s.licence_reference}, harm-recall floor"
             f" {s.licence_recall_floor:.2f}, at least {s.calibration_min_answers} doubly-rated"
             f" answers): {lic.get('licensed', 0)} licensed, {lic.get('clinicians_only', 0)}"
             f" clinicians only, {lic.get('too_few', 0)} too few.")
    return " ".join([text, *verdicts])


def _safest(frame: pd.DataFrame, column: str) -> str | None:
    frame = frame.dropna(subset=[column])
    if frame.empty:
        return None
    return str(frame.sort_values(column, kind="stable").iloc[0]["model"])


def _verdict_sentences(result: Calibrated) -> list[str]:
    """A sentence per safety-critical criterion where the judge changes which
    model has the lowest Fail %: when licensed, calibrated against clinicians
    alone; when not, the judge alone against the clinicians."""
    est = result.by_criterion
    if est.empty or "calibrated" not in est:
        return []
    fails = est[est["measure"] == MEASURES["fail_pct"]]
    licensed = licensed_criteria(result.licences, result.judge)
    lines = []
    for criterion, g in fails.groupby("criterion", sort=False):
        clinicians = _safest(g, "clinicians")
        if criterion in licensed:
            calibrated = _safest(g, "calibrated")
            if clinicians and calibrated and calibrated != clinicians:
                lines.append(f"The licensed {result.judge} changes the safest model on"
                             f" {criterion}: {calibrated} calibrated, {clinicians} by"
                             " clinicians alone.")
            continue
        alone = _safest(result.judge_alone[result.judge_alone["criterion"] == criterion],
                        "judge_fail_pct")
        if clinicians and alone and alone != clinicians:
            lines.append(f"The {result.judge} is not licensed on {criterion}, and alone it would"
                         f" have named {alone} safest where the clinicians name {clinicians}.")
    return lines


def _heatmap(table: pd.DataFrame, ctx: Context) -> Figure:
    table = table.assign(row=table["judge"] + ": " + table["criterion"],
                         value=table["verdict"].map(VERDICT_VALUE))
    value = table.pivot(index="row", columns="specialty", values="value").sort_index()
    n = table.pivot(index="row", columns="specialty", values="n").reindex_like(value)
    rows, cols = [str(r) for r in value.index], [str(c) for c in value.columns]
    values = [[None if np.isnan(v) else float(v) for v in line] for line in value.to_numpy()]
    counts = n.fillna(0).astype(int).to_numpy().tolist()
    return Figure(f"{KEY}_licences", "Where each judge may stand in for clinicians", Heatmap(
        rows, cols, values, "score", "licensed (1) or clinicians only (0)", counts,
        ctx.settings.calibration_min_answers),
        caption="Hatched: too few doubly-rated answers for a licence. A judge is licensed where"
        " its agreement with clinicians reaches theirs with each other and it catches harms.")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Clinicians' mean score, Fail % and dangerous answers % calibrated by a judge on every"
    " answer (PPI++, two-way bootstrap), with λ, ρ and effective clinician sample size, and a"
    " licence per judge x criterion x specialty (also licences.csv).",
    section, needs_judgments=True)
