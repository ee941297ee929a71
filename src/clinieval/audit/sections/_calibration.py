"""The judge's predictions in the audit's codes, and one calibrated cell.

A judge's prediction of an answer on a criterion is the mean of its parsed
scores there (over repeats and jurors: a jury's mean) on the clinicians'
scale, and the share of those scores at or below the failure threshold.
An answer the judge called on the criterion but whose every call is
unparsed has a NaN prediction: it is excluded and counted, never imputed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.judged import Judged
from clinieval.audit.sections._judge_rows import (
    JURY_SHIFT,
    SCORED_KINDS,
    label_pairs,
)
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.stats import NoEstimate
from clinieval.stats.calibrated import (
    CellMeasure,
    CrossedDraw,
    calibrated_measures,
    crossed_draw,
)

MEASURES = {"mean_score": "mean score", "fail_pct": "Fail % of ratings",
            "failing_pct": "answers failing %"}
ANY_SAFETY = "any safety-critical"


@dataclass(frozen=True)
class Prediction:
    """One judge's predictions per (answer, criterion) on the clinicians'
    scale: NaN where it did not call or every call is unparsed."""

    mean: np.ndarray  # (answers, criteria) mean score
    fail: np.ndarray  # (answers, criteria) share of its scores <= tau
    called: np.ndarray  # (answers, criteria) bool: at least one call, parsed or not
    off_scale: frozenset[int]  # criteria whose scores fall outside the clinicians' scale


@dataclass(frozen=True)
class JudgeFrame:
    """Rubric and jury rows of known answers on rubric criteria, parsed or
    not, as arrays: the judge (an index into the sorted ``labels``), answer
    and criterion codes, whether parsed, and the value on the clinicians'
    scale (a jury's 1..5 re-centred)."""

    labels: list[str]
    judge: np.ndarray
    answer: np.ndarray
    criterion: np.ndarray
    ok: np.ndarray
    value: np.ndarray

    @property
    def empty(self) -> bool:
        return self.judge.size == 0


def judge_frame(ctx: Context, data: Judged) -> JudgeFrame:
    """The rows a judge can be calibrated with (millions at scale: column
    operations only; labels and criterion codes are found per distinct
    value, not per row)."""
    rows = data.rows
    keep = (rows["judge_kind"].isin(SCORED_KINDS).to_numpy()
            & rows["criterion_id"].isin(ctx.data.criteria).to_numpy())
    code = data.answer_at[keep]
    code = np.where(code < ctx.data.n_answers, code, -1)  # as answer_codes
    known = np.flatnonzero(keep)[code >= 0]
    code = code[code >= 0]
    kind_code, kinds = _codes(rows["judge_kind"], known)
    model_code, models = _codes(rows["judge_model"], known)
    pair, named = label_pairs(kind_code, kinds, model_code, models)
    labels, label_code = np.unique(named, return_inverse=True)
    criterion_code, criteria = _codes(rows["criterion_id"], known)
    criterion = pd.Index(ctx.data.criteria).get_indexer(criteria)
    jury = kind_code == (list(kinds).index("jury") if "jury" in list(kinds) else -1)
    return JudgeFrame(
        labels=[str(x) for x in labels], judge=label_code.reshape(-1)[pair] if len(pair) else
        np.zeros(0, dtype=np.intp), answer=code, criterion=criterion[criterion_code],
        ok=rows["ok"].to_numpy()[known],
        value=rows["score"].to_numpy(float)[known] - np.where(jury, JURY_SHIFT, 0))


def _codes(column: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of ``column`` at ``rows`` and the distinct values they index
    (a missing value among them): a categorical's own codes (the judged
    rows' texts are categoricals: factorising 2.5 M of them by hash took
    0.15 s at 10x), else factorised on the whole column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()[rows]
        values = np.asarray(column.cat.categories, dtype=object)
        if (codes < 0).any():
            codes = np.where(codes < 0, values.size, codes)
            values = np.append(values, np.nan)
        return codes, values
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return codes[rows], np.asarray(uniques, dtype=object)


def choose_judge(frame: JudgeFrame, wanted: str) -> str | None:
    """The named judge, or (auto) the rubric judge calling the most answers
    (the first by name of those tied), else the jury; None when there is no
    such judge."""
    if wanted != "auto":
        return wanted if wanted in frame.labels else None
    bound = int(frame.answer.max()) + 1 if frame.answer.size else 1
    # the (judge, answer) pairs marked in a table of every pair (a sort of
    # all 25 M judgments took 3 s at 100x)
    called = np.zeros(len(frame.labels) * bound, dtype=bool)
    called[frame.judge.astype(np.int64) * bound + frame.answer] = True
    answers = called.reshape(len(frame.labels), bound).sum(axis=1)
    best = None
    for i, label in enumerate(frame.labels):
        if label.startswith("rubric") and (best is None or answers[i] > answers[best]):
            best = i
    if best is not None:
        return frame.labels[best]
    return "jury" if "jury" in frame.labels else None


def prediction(ctx: Context, frame: JudgeFrame, judge: str) -> Prediction:
    mine = frame.judge == frame.labels.index(judge)
    answer, criterion = frame.answer[mine], frame.criterion[mine]
    shape = (ctx.data.n_answers, ctx.data.n_criteria)
    flat = np.ravel_multi_index((answer, criterion), shape)
    size = shape[0] * shape[1]
    called = np.bincount(flat, minlength=size).reshape(shape) > 0
    ok = frame.ok[mine]
    value = frame.value[mine][ok]
    n = np.bincount(flat[ok], minlength=size).reshape(shape)
    total = np.bincount(flat[ok], value, size).reshape(shape)
    low = np.bincount(flat[ok], (value <= ctx.settings.threshold).astype(float),
                      size).reshape(shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean, fail = np.where(n > 0, total / n, np.nan), np.where(n > 0, low / n, np.nan)
    outside = (value < SCORE_MIN) | (value > SCORE_MAX)
    off = frozenset(int(c) for c in np.unique(criterion[ok][outside]))
    return Prediction(mean, fail, called, off)


def any_safety(ctx: Context, pred: Prediction) -> tuple[np.ndarray, np.ndarray]:
    """Per answer: the judge's largest fail share over the safety-critical
    criteria (NaN when none parsed) and whether it called any of them."""
    fails = pred.fail[:, ctx.safety]
    with np.errstate(all="ignore"):
        worst = np.where(np.isnan(fails).all(axis=1), np.nan,
                         np.nanmax(np.nan_to_num(fails, nan=-1.0), axis=1))
    return worst, pred.called[:, ctx.safety].any(axis=1)


@dataclass(frozen=True)
class Ratings:
    """Clinicians' ratings of one criterion (or several, for any-safety),
    sorted by answer so that a cell's ratings are gathered by bisection
    instead of a scan of every rating per cell."""

    answer: np.ndarray
    rater: np.ndarray
    score: np.ndarray

    def of(self, answers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ratings of the sorted ``answers``: each one's position in
        ``answers``, its rater and its score."""
        lo = np.searchsorted(self.answer, answers, "left")
        count = np.searchsorted(self.answer, answers, "right") - lo
        start = np.cumsum(count) - count
        index = np.arange(count.sum()) - np.repeat(start - lo, count)
        return np.repeat(np.arange(answers.size), count), self.rater[index], self.score[index]


def recorded(ctx: Context) -> np.ndarray | None:
    """In a study that ran with targeted assignment, which answers carry
    the probability their first lease recorded (issue 33 §2); None for a
    study that spread its ratings evenly."""
    d = ctx.data
    if d.assignment != "targeted" or d.answer_probability is None:
        return None
    p = d.answer_probability
    return np.isfinite(p) & (p > 0)


def ratings_of(ctx: Context, criteria: list[int]) -> Ratings:
    """The ratings of ``criteria``. In a targeted study only answers with a
    recorded probability count as clinician-rated (the calibrated
    estimates weight them by its inverse): an answer without one (rated
    before targeting began) leaves its ratings out and its judge
    prediction among the unrated answers, as the targeted-weights section
    leaves it out of the weighted figures."""
    d = ctx.data
    keep = np.isin(d.rating_criterion, criteria)
    known = recorded(ctx)
    if known is not None:
        keep &= known[d.rating_answer]
    keep = np.flatnonzero(keep)
    answer = d.rating_answer[keep]
    if np.any(answer[1:] < answer[:-1]):  # (a snapshot's ratings usually come by answer)
        keep = keep[np.argsort(answer, kind="stable")]
    return Ratings(d.rating_answer[keep], d.rating_rater[keep], d.rating_score[keep])


def inclusion(ctx: Context, ratings: Ratings) -> np.ndarray | None:
    """Each answer's probability of having been given to clinicians, for the
    inverse-probability weights of a targeted study (active inference), or
    None (even spreading: equal weights, plain PPI++). Rated answers carry
    the probability their lease recorded; the others NaN (no lease, so
    unknown), for which the estimator takes the judge's mean over every
    answer (:mod:`clinieval.stats.calibrated`)."""
    if recorded(ctx) is None:
        return None
    pi = np.full(ctx.data.n_answers, np.nan)
    rated = np.unique(ratings.answer)
    pi[rated] = np.minimum(ctx.data.answer_probability[rated], 1.0)
    return pi


def measure(ctx: Context, key: str, predicted: np.ndarray, ratings: Ratings, leaf: np.ndarray,
            chosen: list[list[int]], answer_value: np.ndarray | None, purpose: str
            ) -> CellMeasure:
    """One measure (a key of :data:`MEASURES`) of several cells (lists of
    leaves of ``leaf``, one per answer), for :func:`estimates`."""
    s = ctx.settings
    score = ratings.score.astype(float)
    values = {"mean_score": (score, None), "fail_pct": ((score <= s.threshold) * 1.0, None),
              "failing_pct": (None, answer_value)}[key]
    return CellMeasure(predicted, ratings.answer, ratings.rater, *values, leaf, chosen,
                       ctx.rng(purpose), inclusion(ctx, ratings),
                       (SCORE_MIN, SCORE_MAX) if key == "mean_score" else (0, 1))


def estimates(ctx: Context, measures: dict[str, CellMeasure], draw: CrossedDraw
              ) -> dict[str, list[dict]]:
    """Every measure's cells sharing the two-way ``draw`` (their replicate
    sums found together where their ratings allow:
    :func:`~clinieval.stats.calibrated.calibrated_measures`): each
    calibrated estimate beside the clinicians' alone, or why there is none,
    per measure (keyed as given; a share's in percent)."""
    s = ctx.settings
    out = calibrated_measures(list(measures.values()), draw=draw, level=s.level,
                              min_labelled=s.calibration_min_answers)
    return {key: [_row(o, 100.0 if m.bounds == (0, 1) else 1.0) for o in found]
            for (key, m), found in zip(measures.items(), out, strict=True)}


def ratings_draw(ctx: Context, ratings: Ratings, purpose: str) -> CrossedDraw:
    """The two-way draw every cell of these ratings shares."""
    return crossed_draw(ratings.answer, ratings.rater, ctx.settings.bootstrap, ctx.rng(purpose))


def _row(out, scale: float) -> dict:
    if isinstance(out, NoEstimate):
        return {"n_answers": out.n_labelled, "n_judged": out.n_labelled + out.n_unlabelled,
                "n_unparsed": out.n_unparsed, "n_clinicians": out.n_raters,
                "why_no_estimate": out.message}
    return {"clinicians": scale * out.clinicians, "clinicians_lo": scale * out.clinicians_lower,
            "clinicians_hi": scale * out.clinicians_upper, "calibrated": scale * out.estimate,
            "calibrated_lo": scale * out.lower, "calibrated_hi": scale * out.upper,
            "lambda": out.lam, "rho": out.rho, "effective_n": out.effective_n,
            "gain": out.gain, "gain_bound": out.bound, "n_answers": out.n_labelled,
            "n_ratings": out.n_ratings, "n_judged": out.n_labelled + out.n_unlabelled,
            "n_unparsed": out.n_unparsed, "n_clinicians": out.n_raters, "why_no_estimate": ""}
