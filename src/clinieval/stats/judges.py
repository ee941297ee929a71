"""How far an automated judge agrees with clinicians, and clinicians with
each other: ICC(3,k) after z-scoring within rater (MedHELM's ICC3k-z),
Macro-F1 of verdicts (CSEDB) and Cohen's kappa.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from clinieval.stats.scoring import (
    Comparison,
    _comparisons,
    bootstrap_case_means,
)


def zscore_columns(matrix) -> np.ndarray:
    """Z-score each column (one rater) over its own items: removes a rater's
    leniency and scale before agreement is measured. A column with no spread
    becomes NaN (its agreement is undefined)."""
    m = np.asarray(matrix, dtype=float)
    sd = m.std(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sd > 0, (m - m.mean(axis=0)) / sd, np.nan)


def icc3k(matrix) -> float:
    """ICC(3,k), two-way mixed, consistency, average of k raters
    (Shrout & Fleiss, 1979; McGraw & Wong, 1996):
    (MS_items - MS_error) / MS_items, from an ``(items, k)`` complete table.
    NaN with fewer than two items or any missing cell."""
    x = np.asarray(matrix, dtype=float)
    n, k = x.shape
    if n < 2 or k < 2 or np.isnan(x).any():
        return float("nan")
    grand = x.mean()
    ss_items = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_raters = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_error = ((x - grand) ** 2).sum() - ss_items - ss_raters
    ms_items = ss_items / (n - 1)
    ms_error = ss_error / ((n - 1) * (k - 1))
    # Items whose means are equal up to rounding leave no between-item
    # variance; dividing by the rounding error would give a huge ICC.
    if ss_items <= 1e-12 * ((x - grand) ** 2).sum():
        return float("nan")
    return float((ms_items - ms_error) / ms_items)


def icc3k_z(matrix) -> float:
    """MedHELM's ICC3k-z: ICC(3,k) of the table after z-scoring each rater."""
    return icc3k(zscore_columns(matrix))


def bootstrap_icc3k_z(table, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` :func:`icc3k_z` of an ``(items, k)`` table with its items
    resampled, one replicate after another (NaN where a replicate has no
    spread)."""
    n = len(table)
    return np.array([icc3k_z(table[rng.integers(0, n, n)]) for _ in range(B)])


@dataclass(frozen=True)
class RaterPairICC:
    """ICC3k-z of rater pairs, and how many pairs were left out and why."""

    values: np.ndarray
    """One ICC per pair that shares enough items and has a defined ICC."""
    too_few: int
    """Pairs sharing at least one item but fewer than ``min_shared``."""
    undefined: int
    """Pairs sharing enough items whose ICC is undefined (a rater without
    spread on them)."""


def pairwise_rater_icc(item, rater, score, min_shared: int = 3) -> RaterPairICC:
    """ICC3k-z (k = 2) of every rater pair sharing at least ``min_shared``
    items; the average of these is the inter-clinician baseline.

    ``item`` and ``rater`` are integer codes, ``score`` one value per
    (item, rater) (a rater's composite, e.g. the mean of its axes). On two
    shared items each rater's z-scores are (-0.71, 0.71): the ICC is exactly
    1 when the pair orders them alike and undefined otherwise, so two items
    would admit agreeing pairs and drop disagreeing ones; hence at least 3.
    """
    table = _wide(item, rater, score)
    rated = ~np.isnan(table)
    shared = rated.T.astype(np.int64) @ rated  # items each pair of raters shares
    out, too_few, undefined = [], 0, 0
    for a, b in combinations(range(table.shape[1]), 2):
        if shared[a, b] < min_shared:
            too_few += bool(shared[a, b])
            continue
        both = rated[:, a] & rated[:, b]
        value = icc3k_z(table[both][:, [a, b]])
        undefined += bool(np.isnan(value))
        if not np.isnan(value):
            out.append(value)
    return RaterPairICC(np.asarray(out), too_few, undefined)


def _wide(item, rater, score) -> np.ndarray:
    item = np.asarray(item, dtype=np.int64)
    rater = np.asarray(rater, dtype=np.int64)
    table = np.full((item.max() + 1, rater.max() + 1), np.nan)
    table[item, rater] = np.asarray(score, dtype=float)
    return table


def cohen_kappa(a, b) -> float:
    """Cohen's kappa of two raters' labels on the same items (Cohen, 1960):
    (observed agreement - chance agreement) / (1 - chance agreement)."""
    a, b = np.asarray(a), np.asarray(b)
    labels, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    ca, cb = codes[: a.size], codes[a.size:]
    k = labels.size
    table = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k) / a.size
    observed = np.trace(table)
    chance = table.sum(axis=1) @ table.sum(axis=0)
    return float((observed - chance) / (1 - chance)) if chance < 1 else float("nan")


def macro_f1(truth, predicted) -> float:
    """Unweighted mean over classes of F1 = 2TP / (2TP + FP + FN); a class
    that appears in neither list is not counted, one absent from the
    predictions only scores 0."""
    truth, predicted = np.asarray(truth), np.asarray(predicted)
    scores = []
    for label in np.union1d(truth, predicted):
        tp = np.sum((truth == label) & (predicted == label))
        fp = np.sum((truth != label) & (predicted == label))
        fn = np.sum((truth == label) & (predicted != label))
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def macro_f1_by_group(group, truth, predicted) -> np.ndarray:
    """Binary Macro-F1 (as :func:`macro_f1`) of each group's items:
    ``group`` integer codes 0..G-1, ``truth`` and ``predicted`` booleans. A
    class in neither list of a group is not counted in its mean; every group
    has items, so each value is defined."""
    group = np.asarray(group, dtype=np.int64)
    t, p = np.asarray(truth, dtype=bool), np.asarray(predicted, dtype=bool)
    n = int(group.max()) + 1 if group.size else 0
    tp, fp, fn, tn = (np.bincount(group, weights=w, minlength=n)
                      for w in (t & p, ~t & p, t & ~p, ~t & ~p))
    with np.errstate(invalid="ignore", divide="ignore"):
        positive = np.where(tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        negative = np.where(tn + fp + fn > 0, 2 * tn / (2 * tn + fp + fn), np.nan)
    return np.nanmean(np.column_stack([positive, negative]), axis=1)


def bootstrap_macro_f1(cells, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` fail/pass Macro-F1 from per-answer confusion counts ``cells``
    ``(answers, 4)`` (tp, fp, fn, tn of the "fail" class), answers resampled
    (:func:`~clinieval.stats.scoring.bootstrap_case_means`): the mean of the
    F1 of "fail" and of "pass" (whose tp is the tn of "fail")."""
    reps = bootstrap_case_means(cells, B, rng)
    tp, fp, fn, tn = reps.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return (2 * tp / (2 * tp + fp + fn) + 2 * tn / (2 * tn + fn + fp)) / 2


def leave_one_out_kappa(judge, clinicians) -> tuple[np.ndarray, np.ndarray]:
    """Auto-MOOVE's check: for each clinician ``c`` of an ``(items, C)``
    label table, kappa of the judge against ``c`` and kappa of the other
    clinicians' majority label against ``c``. A judge is within the human
    range when its kappas lie within two SD of the clinicians' own."""
    labels = np.asarray(clinicians)
    judge = np.asarray(judge)
    judge_k, human_k = [], []
    for c in range(labels.shape[1]):
        others = np.delete(labels, c, axis=1)
        judge_k.append(cohen_kappa(judge, labels[:, c]))
        human_k.append(cohen_kappa(_majority(others), labels[:, c]))
    return np.asarray(judge_k), np.asarray(human_k)


def _majority(labels) -> np.ndarray:
    """Row-wise most frequent label; ties go to the smallest label."""
    values, codes = np.unique(labels, return_inverse=True)
    codes = codes.reshape(labels.shape)
    counts = np.apply_along_axis(np.bincount, 1, codes, minlength=values.size)
    return values[counts.argmax(axis=1)]


def self_preference(judge, reference, own, B: int, rng: np.random.Generator,
                    level: float = 0.95) -> Comparison:
    """How much higher a judge scores answers of its own model family than a
    reference predicts: the mean residual on own answers minus the mean on
    the rest, in the judge's units.

    The judge's scores are regressed on the reference's (clinicians, or the
    other judges) by least squares over the *other* answers only, so the
    fit learns how the judge follows the reference without the bias being
    measured. A plain difference judge - reference would confound a judge's
    imperfect agreement (slope below one: regression to the mean) with the
    quality of its own family's answers. Self-preference in this sense is
    the judge favouring its own outputs beyond what an independent evaluator
    sees (Panickssery et al., 2024, "LLM evaluators recognize and favor their
    own generations").

    ``judge``, ``reference`` (one per answer, finite) and ``own`` (bool).
    The two groups are resampled independently and the line is refitted on
    each resample of the rest: the interval carries the fit's uncertainty
    too (holding it fixed missed the planted bias measured against noisy
    clinicians). Returns a :class:`~clinieval.stats.scoring.Comparison`,
    own minus rest.
    """
    y = np.asarray(judge, dtype=float)
    x = np.asarray(reference, dtype=float)
    own = np.asarray(own, dtype=bool)
    slope, intercept = np.polyfit(x[~own], y[~own], 1)
    residual = y - (intercept + slope * x)
    observed = np.array([residual[own].mean(), residual[~own].mean()])
    reps = _refitted_own_residuals(x[own], y[own], x[~own], y[~own], B, rng)
    # the rest's mean residual is 0 in every refit (least squares with an intercept)
    reps = np.column_stack([reps, np.zeros_like(reps)])
    return _comparisons(observed, reps[np.isfinite(reps[:, 0])], level)[0]


def _refitted_own_residuals(x_own, y_own, x_rest, y_rest, B: int,
                            rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` mean residual of resampled own answers from the least-squares
    line of resampled other answers; NaN when a resample of the rest has one
    reference value only (no line)."""
    centre_x, centre_y = x_rest.mean(), y_rest.mean()  # centred sums keep the precision
    dx, dy = x_rest - centre_x, y_rest - centre_y
    own = bootstrap_case_means(np.column_stack([x_own - centre_x, y_own - centre_y]), B, rng)
    rest = bootstrap_case_means(np.column_stack([dx, dy, dx * dx, dx * dy]), B, rng)
    mx, my, mxx, mxy = rest.T
    with np.errstate(invalid="ignore", divide="ignore"):
        sxx = mxx - mx * mx
        slope = np.where(sxx > 1e-12 * max(mxx.max(), 1e-300), (mxy - mx * my) / sxx, np.nan)
    return own[:, 1] - my - slope * (own[:, 0] - mx)
