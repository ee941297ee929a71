"""A study that ran with decision-targeted assignment chose answers with
unequal, recorded probabilities (issue 33 §2): its clinicians-only Fail %
(answers failing a criterion by the response rule, and dangerous answers)
and mean scores, weighted by inverse probability within each model x
specialty cell and by cell size across cells (:mod:`clinieval.stats.ipw`),
beside the plain figures that lean towards where the targeting went.
Shown only for such a study."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.result import Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.contract import vocabulary
from clinieval.stats.ipw import cell_weights, weighted_answer_mean

KEY, TITLE = "targeted_weights", "Targeted assignment: weighted estimates"
BOOTSTRAP = 500


def _weights(ctx: Context) -> np.ndarray | None:
    """Per answer its weight (NaN: not rated, or no probability recorded)."""
    data = ctx.data
    p = data.answer_probability
    rated = np.isfinite(p) & (p > 0)
    if not rated.any():
        return None
    cell = data.answer_model.astype(np.int64) * len(data.specialties) + data.answer_specialty
    size = np.bincount(cell, minlength=data.n_models * len(data.specialties))
    w = np.full(p.size, np.nan)
    w[rated] = cell_weights(p[rated], cell[rated], size)
    return w


def _row(ctx, w, model, measure, values, rng) -> dict:
    data = ctx.data
    mine = (data.answer_model == model) & np.isfinite(w) & np.isfinite(values)
    keep = mine[data.rating_answer]
    if not keep.any():
        return {}
    answers, raters = data.rating_answer[keep], data.rating_rater[keep]
    got = weighted_answer_mean(np.nan_to_num(values), np.nan_to_num(w), answers, raters,
                               rng=rng, B=BOOTSTRAP, level=ctx.settings.level)
    plain = float(np.nanmean(values[mine]))
    return {"model": data.model_names[model], "measure": measure, "weighted": got.estimate,
            "lower": got.lower, "upper": got.upper, "plain": plain,
            "answers": got.n_answers, "raters": got.n_raters}


def compute(ctx: Context) -> pd.DataFrame | Skipped:
    data = ctx.data
    if data.assignment != "targeted":
        return Skipped("the study spread its ratings evenly (no assignment probabilities).")
    w = _weights(ctx)
    if w is None:
        return Skipped("no rated answer carries a recorded assignment probability.")
    rng = ctx.rng("targeted_weights")
    measures = [("dangerous answers %", ctx.answer_dangerous)] if ctx.safety else []
    measures += [(f"{ctx.name(c)} Fail %", ctx.answer_fail[:, c]) for c in ctx.safety]
    mean = _answer_mean_score(ctx)
    measures += [(f"{ctx.name(c)} mean score", mean[:, c]) for c in ctx.criteria]
    rows = [r for m in range(data.n_models) for name, v in measures
            if (r := _row(ctx, w, m, name, v, rng))]
    return pd.DataFrame(rows) if rows else Skipped("no weighted answer has a rating.")


def _answer_mean_score(ctx: Context) -> np.ndarray:
    """(answers, criteria) mean score of the answer's ratings (NaN unrated)."""
    data = ctx.data
    shape = (data.n_answers, data.n_criteria)
    scores = np.asarray(vocabulary.SCORES, dtype=float)[data.rating_score]
    total, n = np.zeros(shape), np.zeros(shape)
    np.add.at(total, (data.rating_answer, data.rating_criterion), scores)
    np.add.at(n, (data.rating_answer, data.rating_criterion), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / n, np.nan)


def present(frame: pd.DataFrame, ctx: Context) -> Section:
    summary = ("This study chose answers where its decisions were open, with recorded"
               " probabilities. Per model: the clinicians' Fail % and mean scores weighted by"
               " inverse probability within each model x specialty cell and by the cell's"
               " size across cells (unbiased for the study's answers), with a"
               f" {ctx.settings.level:.0%} two-way bootstrap interval over raters and answers"
               f" ({BOOTSTRAP} resamples), beside the plain unweighted figure, which leans"
               " towards the cells and answers the targeting favoured.")
    return Section(KEY, TITLE, summary, {"weighted": frame}, [],
                   {"rows": int(len(frame))})


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda frame: present(frame, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "For a study run with targeted assignment: Fail % and mean scores weighted by the"
    " recorded assignment probabilities, beside the plain ones.",
    section, optional=True)
