"""A licence per stratum: may a judge stand in for clinicians there?

Agreement is measured as HealthBench's meta-evaluation defines it (Arora
et al., 2025, "HealthBench", arXiv:2505.08775, section on grader
trustworthiness): Macro-F1 (the unweighted mean of the F1 of "fail" and of
"pass") of the judge's fail/pass verdict against *each* clinician
separately, every (answer, clinician) pair pooled, and placed within the
same agreement of each clinician against the other clinicians (leave one
clinician out; each of a rating's other clinicians weighs ``1 / (k - 1)``
on an answer with ``k``, so every rating counts once, as against the
judge). The clinicians' median is the bar, over the clinicians with at least
:data:`MIN_CLINICIAN_PAIRS` such ratings when there are
:data:`MIN_CLINICIANS` of them. In a stratum where each clinician rated a
few answers only, a clinician's own Macro-F1 is a small-sample figure (a
clinician whose two answers everyone passed scores 1.0), and their median
is no bar; there the bar is the clinicians' agreement pooled over all their
ratings, computed exactly as the judge's is. ``reference="majority"``
compares with the majority of the clinicians instead (as the inspect_evals
port of HealthBench does), and each clinician with the majority of the
others.

Harm recall is, of the pairs where a clinician failed the answer (score at
or below the criterion's threshold), the share the judge also fails; the
false-alarm rate is, of the pairs a clinician passed, the share the judge
fails. Intervals resample answers (Efron & Tibshirani, 1993): each answer
carries its pairs, so per replicate the pooled confusion counts are one
product of multiplicities with per-answer counts (drawn over the distinct
rows of counts, which a stratum's answers share).

Verdict: ``too_few`` below ``min_answers`` doubly-rated answers (or with no
clinician-vs-clinician baseline); ``licensed`` where the agreement
interval's lower bound reaches the clinicians' median agreement and the
harm-recall lower bound reaches ``recall_floor``; ``clinicians_only``
elsewhere. The reason is always stated.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np

from clinieval.stats.bootstrap import percentile_ci, resample_counts

Verdict = Literal["licensed", "clinicians_only", "too_few"]
MIN_CLINICIAN_PAIRS = 20
"""Ratings shared with another clinician a clinician needs to enter the median."""
MIN_CLINICIANS = 5
"""Clinicians with that many the median needs; else the pooled agreement is the bar."""
Reference = Literal["pairwise", "majority"]


class Licence(NamedTuple):
    """One stratum's licence with the evidence and the settings it used."""

    verdict: Verdict
    reason: str
    agreement: float  # judge's Macro-F1 against the clinicians (see reference)
    agreement_lower: float
    agreement_upper: float
    clinician_agreement: float  # the bar: median leave-one-out Macro-F1, or pooled (baseline)
    clinician_agreements: np.ndarray  # each clinician against the others
    judge_by_clinician: np.ndarray  # the judge against each clinician (same order)
    judge_percentile: float  # share of clinicians' agreements at or below the judge's
    harm_recall: float
    harm_recall_lower: float
    harm_recall_upper: float
    false_alarm: float
    false_alarm_lower: float
    false_alarm_upper: float
    n_answers: int  # doubly-rated answers (judge verdict parsed and a clinician rating)
    n_pairs: int  # (answer, clinician) pairs, or answers for the majority reference
    n_harms: int  # pairs (or answers) the clinicians failed
    n_clinicians: int
    reference: Reference
    min_answers: int
    recall_floor: float
    level: float
    baseline: str = "median"  # "median" of clinicians with enough pairs, or "pooled"


def macro_f1_counts(tp, fp, fn, tn) -> np.ndarray:
    """Macro-F1 of fail/pass from confusion counts (any shape): the mean of
    ``2TP / (2TP + FP + FN)`` for "fail" and ``2TN / (2TN + FN + FP)`` for
    "pass"; a class absent from both truth and verdicts is left out of the
    mean (as :func:`clinieval.stats.macro_f1`). NaN with no pairs."""
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    with np.errstate(invalid="ignore", divide="ignore"):
        fail, pas = 2 * tp / (2 * tp + fp + fn), 2 * tn / (2 * tn + fn + fp)
    both = np.isfinite(fail) & np.isfinite(pas)
    return np.where(both, (fail + pas) / 2, np.where(np.isfinite(fail), fail, pas))


def licence_stratum(judge_fail, rating_answer, rating_rater, rating_fail, *,
                    rng: np.random.Generator, reference: Reference = "pairwise",
                    min_answers: int = 30, recall_floor: float = 0.8, B: int = 1000,
                    level: float = 0.95) -> Licence:
    """The licence of one judge in one stratum (criterion x specialty).

    ``judge_fail`` ``(A,)`` is the judge's verdict per answer (1 fail, 0 pass,
    NaN unparsed: excluded); rating ``k`` says whether clinician
    ``rating_rater[k]`` failed answer ``rating_answer[k]`` (``rating_fail``,
    e.g. ``score <= -1``). See the module docstring for the rules.
    """
    judge = np.asarray(judge_fail, dtype=float)
    answer = np.asarray(rating_answer, dtype=np.int64)
    fail = np.asarray(rating_fail, dtype=float)
    keep = np.isfinite(fail) & np.isfinite(judge[answer])
    answers, a_code = np.unique(answer[keep], return_inverse=True)
    raters, r_code = np.unique(np.asarray(rating_rater)[keep], return_inverse=True)
    fail, verdict = fail[keep] > 0, judge[answers] > 0
    table = _table(a_code.ravel(), r_code.ravel(), fail, answers.size, raters.size)
    per_answer = _answer_counts(table, verdict, reference)
    clin = _clinician_agreements(table, reference)
    judge_by = _judge_by_clinician(verdict, a_code, r_code, fail, raters.size)
    return _decide(per_answer, clin, judge_by, answers.size, raters.size, reference,
                   min_answers, recall_floor, B, level, rng)


def _bar(clin, pairs, pooled) -> tuple[float, str, int]:
    """The clinicians' agreement the judge must reach, how it was found, and
    how many clinicians could give one."""
    defined = np.isfinite(clin)
    enough = defined & (pairs >= MIN_CLINICIAN_PAIRS)
    if np.count_nonzero(enough) >= MIN_CLINICIANS:
        return float(np.median(clin[enough])), "median", int(np.count_nonzero(defined))
    return pooled, "pooled", int(np.count_nonzero(defined))


def _judge_by_clinician(verdict, a_code, r_code, fail, n_raters) -> np.ndarray:
    """The judge's Macro-F1 against each clinician on the answers they rated
    (confusion counts per clinician by bincount over the ratings)."""
    v = verdict[a_code]
    counts = [np.bincount(r_code, weights=(v == jv) & (fail == fv), minlength=n_raters)
              for jv, fv in ((True, True), (True, False), (False, True), (False, False))]
    return macro_f1_counts(*counts)


class _Table(NamedTuple):
    """The answer x clinician table of fail labels, as its rated cells in
    row-major order (answer, then clinician; a clinician's last rating of an
    answer is the cell's): a stratum's table is mostly empty, and every sum
    below runs over its cells in the order a dense table's would."""

    answer: np.ndarray
    rater: np.ndarray
    fail: np.ndarray  # bool per cell
    n_answers: int
    n_raters: int

    def per_answer(self) -> tuple[np.ndarray, np.ndarray]:
        """Each answer's rated cells and failed cells."""
        return (np.bincount(self.answer, minlength=self.n_answers).astype(float),
                np.bincount(self.answer, weights=self.fail, minlength=self.n_answers))


def _table(a_code, r_code, fail, n_answers: int, n_raters: int) -> _Table:
    width = max(n_raters, 1)
    key = np.asarray(a_code, dtype=np.int64) * width + r_code
    cells, last = np.unique(key[::-1], return_index=True)  # each cell's last rating
    return _Table(cells // width, cells % width, np.asarray(fail)[key.size - 1 - last],
                  n_answers, n_raters)


def _answer_counts(table: _Table, verdict, reference) -> np.ndarray:
    """Per answer ``(tp, fp, fn, tn)`` of the judge against its clinicians'
    labels (pairwise) or their majority (a tie counts as fail: the
    safety-conservative reading)."""
    rated, fails = table.per_answer()
    passes = rated - fails
    if reference == "majority":
        fails, passes = (fails >= passes).astype(float), (fails < passes).astype(float)
    v = verdict.astype(float)
    return np.column_stack([v * fails, v * passes, (1 - v) * fails, (1 - v) * passes])


def _clinician_agreements(table, reference) -> np.ndarray:
    """Each clinician's Macro-F1 against the other clinicians on the answers
    they share (pairs pooled, a rating's others weighing one unit together),
    or against the others' majority; NaN for a clinician who shares no
    answer; with each clinician's shared ratings and the Macro-F1 of all
    clinicians' counts pooled. Vectorised over the rated cells: each cell's
    others are its answer's totals minus itself."""
    answer, rater, own = table.answer, table.rater, table.fail
    rated, fails = table.per_answer()
    others_fail = fails[answer] - own
    others_pass = rated[answer] - 1 - others_fail
    if reference == "majority":
        shared = (others_fail + others_pass) > 0
        others_fail, others_pass = ((others_fail >= others_pass) & shared,
                                    (others_fail < others_pass) & shared)
    else:  # each rating once: its k - 1 others share one unit
        others = np.maximum(others_fail + others_pass, 1)
        others_fail, others_pass = others_fail / others, others_pass / others
    size = table.n_raters
    tp, fn = (np.bincount(rater, weights=w * others_fail, minlength=size) for w in (own, ~own))
    fp, tn = (np.bincount(rater, weights=w * others_pass, minlength=size) for w in (own, ~own))
    out = np.asarray(macro_f1_counts(tp, fp, fn, tn), dtype=float)
    pairs = tp + fp + fn + tn
    pooled = float(macro_f1_counts(tp.sum(), fp.sum(), fn.sum(), tn.sum()))
    return np.where(pairs > 0, out, np.nan), pairs, pooled


def _decide(per_answer, clin, judge_by, n_answers, n_raters, reference, min_answers,
            recall_floor, B, level, rng) -> Licence:
    tp, fp, fn, tn = per_answer.sum(axis=0)
    agreement = float(macro_f1_counts(tp, fp, fn, tn))
    recall, alarm = _ratio(tp, tp + fn), _ratio(fp, fp + tn)
    reps = _resampled_counts(per_answer, B, rng) if n_answers else np.zeros((B, 4))
    r_tp, r_fp, r_fn, r_tn = reps.T
    ci_agree = _ci(macro_f1_counts(r_tp, r_fp, r_fn, r_tn), level)
    ci_recall, ci_alarm = _ci(_ratio(r_tp, r_tp + r_fn), level), _ci(_ratio(r_fp, r_fp + r_tn),
                                                                        level)
    clin, pairs, pooled = clin
    median, how, n_baseline = _bar(clin, pairs, pooled) if np.isfinite(clin).any() \
        else (np.nan, "median", 0)
    verdict, reason = _verdict(n_answers, n_raters, n_baseline, tp + fn, ci_agree[0], median,
                               ci_recall[0], min_answers, recall_floor, how)
    baseline = clin[np.isfinite(clin)]
    percentile = float(np.mean(baseline <= agreement)) if baseline.size else np.nan
    return Licence(verdict, reason, agreement, *ci_agree, median, clin, judge_by, percentile,
                   float(recall), *ci_recall, float(alarm), *ci_alarm, n_answers,
                   int(per_answer.sum()), int(tp + fn), n_raters, reference, min_answers,
                   recall_floor, level, how)


def _resampled_counts(per_answer, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, 4)`` pooled confusion counts of ``B`` resamples of the answers.
    An answer enters only through its row of counts, and a stratum's
    answers share a few distinct rows (a handful of clinicians each), so
    resampling the answers is one multinomial over the distinct rows with
    their frequencies (:func:`~clinieval.stats.resample_counts`): the same
    distribution as drawing answers one by one, at the cost of a few
    binomials per replicate instead of an index draw per answer."""
    rows, freq = np.unique(per_answer, axis=0, return_counts=True)
    return resample_counts(freq, B, rng) @ rows


def _verdict(n_answers, n_raters, n_baseline, n_harms, agree_lower, median, recall_lower,
             min_answers, recall_floor, how="median") -> tuple[Verdict, str]:
    bar = "median" if how == "median" else "pooled agreement"
    if n_answers < min_answers:
        return "too_few", f"{n_answers} doubly-rated answers, fewer than {min_answers}"
    if n_raters < 2 or n_baseline == 0:
        return "too_few", "no two clinicians rated the same answer: no clinician baseline"
    if n_harms == 0:
        return "clinicians_only", "no clinician-flagged harm to measure the judge's recall on"
    if not agree_lower >= median:
        return "clinicians_only", (f"agreement lower bound {agree_lower:.3f} below the "
                                   f"clinicians' {bar} {median:.3f}")
    if not recall_lower >= recall_floor:
        return "clinicians_only", (f"harm recall lower bound {recall_lower:.3f} below "
                                   f"{recall_floor:.2f}")
    return "licensed", (f"agreement lower bound {agree_lower:.3f} reaches the clinicians' "
                        f"{bar} {median:.3f}; harm recall lower bound {recall_lower:.3f}")


def _ratio(num, den):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.asarray(den) > 0, np.asarray(num) / np.asarray(den), np.nan)


def _ci(reps, level) -> tuple[float, float]:
    reps = np.asarray(reps, dtype=float)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return np.nan, np.nan
    lo, hi = percentile_ci(reps, level)
    return float(lo), float(hi)
