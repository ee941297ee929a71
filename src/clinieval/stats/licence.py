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
    return licence_strata(judge, rating_answer, rating_rater, rating_fail,
                          np.zeros(judge.size, dtype=np.int64), [rng], reference=reference,
                          min_answers=min_answers, recall_floor=recall_floor, B=B,
                          level=level)[0]


def licence_strata(judge_fail, rating_answer, rating_rater, rating_fail, answer_stratum,
                   rngs: list[np.random.Generator], *, reference: Reference = "pairwise",
                   min_answers: int = 30, recall_floor: float = 0.8, B: int = 1000,
                   level: float = 0.95) -> list[Licence]:
    """The licences of one judge in several strata at once, one per
    generator in ``rngs``: answer ``a`` lies in stratum ``answer_stratum[a]``
    (``(A,)``, as ``judge_fail``) and a stratum's resamples come from its own
    generator.

    Each licence is :func:`licence_stratum`'s of its stratum's answers and
    ratings alone, the same figures from the same draws: the tables below
    hold every stratum side by side, a stratum's answers, clinicians and
    cells a run of codes in the order its own would have (every sum over a
    run in that order, so in the same floating-point order). A stratum has
    a few hundred ratings, so one numpy call over all strata costs what its
    call overhead alone costs per stratum.
    """
    judge = np.asarray(judge_fail, dtype=float)
    answer = np.asarray(rating_answer, dtype=np.int64)
    fail = np.asarray(rating_fail, dtype=float)
    keep = np.isfinite(fail) & np.isfinite(judge[answer])
    answer, fail = answer[keep], fail[keep] > 0
    stratum = np.asarray(answer_stratum, dtype=np.int64)
    answers, a_stratum, a_code = _answer_runs(answer, stratum)
    raters, r_stratum, r_code = _runs(stratum[answer], np.asarray(rating_rater)[keep])
    verdict = judge[answers] > 0
    table = _table(a_code, r_code, fail, answers.size, raters.size)
    per_answer = _answer_counts(table, verdict, reference)
    r_edges = np.searchsorted(r_stratum, np.arange(len(rngs) + 1))
    clin = _clinician_agreements(table, reference, r_edges)
    judge_by = _judge_by_clinician(verdict, a_code, r_code, fail, raters.size)
    reps = _replicates(per_answer, a_stratum, B, rngs)
    return _decide(per_answer, a_stratum, clin, judge_by, r_edges, reps, reference,
                   min_answers, recall_floor, level)


def _runs(group, value) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (stratum, value) pairs by stratum and then value, as
    each one's value and stratum, and each item's code: a stratum's codes
    are a run in the order of ``np.unique`` of its values alone. Integer
    values in a range not much wider than their number (clinician codes)
    are marked in a table of every (stratum, value) pair instead of sorted
    twice."""
    value = np.asarray(value)
    if value.dtype.kind in "iu" and value.size:
        low = int(value.min())
        span, strata = int(value.max()) - low + 1, int(group.max()) + 1
        if span * strata <= 8 * value.size + 2**20:
            key = group * span + (value.astype(np.int64) - low)
            seen = np.zeros(span * strata, dtype=bool)
            seen[key] = True
            pairs = np.flatnonzero(seen)
            return pairs % span + low, pairs // span, (np.cumsum(seen) - 1)[key]
    distinct, code = np.unique(value, return_inverse=True)
    width = max(distinct.size, 1)
    pairs, inverse = np.unique(group * width + code.ravel(), return_inverse=True)
    return distinct[pairs % width], pairs // width, inverse.ravel()


def _answer_runs(answer, answer_stratum) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_runs` of the rated answers, each in its one stratum: the
    answers marked in a table of all of them, then (stably) by stratum."""
    seen = np.zeros(answer_stratum.size, dtype=bool)
    seen[answer] = True
    answers = np.flatnonzero(seen)
    answers = answers[np.argsort(answer_stratum[answers], kind="stable")]
    code = np.empty(answer_stratum.size, dtype=np.int64)
    code[answers] = np.arange(answers.size)
    return answers, answer_stratum[answers], code[answer]


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


def _clinician_agreements(table, reference, edges
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each clinician's Macro-F1 against the other clinicians on the answers
    they share (pairs pooled, a rating's others weighing one unit together),
    or against the others' majority; NaN for a clinician who shares no
    answer; with each clinician's shared ratings and, per stratum (its
    clinicians ``edges[s]:edges[s + 1]``), the Macro-F1 of all its
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
    # a stratum's sums over its own run: numpy's pairwise sums, as over its own table
    runs = list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
    pooled = macro_f1_counts(*([x[lo:hi].sum() for lo, hi in runs] for x in (tp, fp, fn, tn)))
    return np.where(pairs > 0, out, np.nan), pairs, pooled


def _decide(per_answer, a_stratum, clin, judge_by, r_edges, reps, reference, min_answers,
            recall_floor, level) -> list[Licence]:
    """Each stratum's licence from its runs of the tables and its
    replicates ``reps`` ``(B, S, 4)``: the counts and their intervals for all
    strata at once (elementwise, or integer sums, so each stratum's figures
    are its own), the bar and the verdict stratum by stratum."""
    S = reps.shape[1]
    # integer counts: their sums are exact in any order
    tp, fp, fn, tn = (np.bincount(a_stratum, weights=per_answer[:, k], minlength=S)
                      for k in range(4))
    agreement = macro_f1_counts(tp, fp, fn, tn)
    recall, alarm = _ratio(tp, tp + fn), _ratio(fp, fp + tn)
    r_tp, r_fp, r_fn, r_tn = (reps[..., k] for k in range(4))
    cis = _cis(np.concatenate([macro_f1_counts(r_tp, r_fp, r_fn, r_tn), _ratio(r_tp, r_tp + r_fn),
                               _ratio(r_fp, r_fp + r_tn)], axis=1), level)
    n_answers = np.bincount(a_stratum, minlength=S).tolist()
    clin, pairs, pooled = clin
    out = []
    for s in range(S):
        lo, hi = int(r_edges[s]), int(r_edges[s + 1])
        mine, ci_agree, ci_recall, ci_alarm = clin[lo:hi], cis[s], cis[S + s], cis[2 * S + s]
        median, how, n_baseline = _bar(mine, pairs[lo:hi], float(pooled[s])) \
            if np.isfinite(mine).any() else (np.nan, "median", 0)
        verdict, reason = _verdict(n_answers[s], hi - lo, n_baseline, tp[s] + fn[s], ci_agree[0],
                                   median, ci_recall[0], min_answers, recall_floor, how)
        baseline = mine[np.isfinite(mine)]
        percentile = float(np.mean(baseline <= agreement[s])) if baseline.size else np.nan
        out.append(Licence(verdict, reason, float(agreement[s]), *ci_agree, median, mine,
                           judge_by[lo:hi], percentile, float(recall[s]), *ci_recall,
                           float(alarm[s]), *ci_alarm, n_answers[s],
                           int(tp[s] + fp[s] + fn[s] + tn[s]), int(tp[s] + fn[s]), hi - lo,
                           reference, min_answers, recall_floor, level, how))
    return out


def _replicates(per_answer, a_stratum, B: int, rngs) -> np.ndarray:
    """``(B, S, 4)`` pooled confusion counts of ``B`` resamples of each
    stratum's answers (zeros for a stratum without any), stratum ``s``
    drawing from ``rngs[s]``. An answer enters only through its row of
    counts, and a stratum's answers share a few distinct rows (a handful of
    clinicians each), so resampling the answers is one multinomial over the
    distinct rows with their frequencies
    (:func:`~clinieval.stats.resample_counts`): the same distribution as
    drawing answers one by one, at the cost of a few binomials per
    replicate instead of an index draw per answer."""
    out = np.zeros((B, len(rngs), 4))
    rows, freq, row_stratum = _distinct_rows(per_answer, a_stratum)
    edges = np.searchsorted(row_stratum, np.arange(len(rngs) + 1)).tolist()
    for s, rng in enumerate(rngs):
        if edges[s + 1] > edges[s]:
            mine = slice(edges[s], edges[s + 1])
            out[:, s] = resample_counts(freq[mine], B, rng) @ rows[mine]
    return out


def _distinct_rows(per_answer, group) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of counts in each group with their frequencies and
    groups, by group and then in ``np.unique(axis=0)``'s order
    (lexicographic), which the resampling's draws follow. The counts are
    small integers, so a row is read as the digits of one integer after its
    group's, and the rows are counted by a bincount of those (a sort, for a
    wide range): ``np.unique`` over rows compares them as records, a sort
    that cost as much as the draws."""
    counts = np.asarray(per_answer, dtype=float)
    group = np.asarray(group, dtype=np.int64)
    width = counts.shape[1]
    base = int(counts.max()) + 1 if counts.size else 1
    span = base ** width
    if counts.size and (counts.min() < 0 or not np.array_equal(counts, np.floor(counts))
                        or span * (int(group.max()) + 1) >= 2**62):
        distinct, freq = np.unique(np.column_stack([group, counts]), axis=0, return_counts=True)
        return distinct[:, 1:], freq, distinct[:, 0].astype(np.int64)
    key = group.copy()
    for k in range(width):
        key = key * base + counts[:, k].astype(np.int64)
    if key.size and int(key.max()) <= 4 * key.size + 2**16:
        tally = np.bincount(key)
        keys = np.flatnonzero(tally)
        freq = tally[keys]
    else:
        keys, freq = np.unique(key, return_counts=True)
    place = base ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (keys[:, None] // place % base).astype(float), freq, keys // span


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


def _cis(reps, level) -> list[tuple[float, float]]:
    """:func:`_ci` of each column of ``reps`` ``(B, m)``: every column's
    quantiles in one call (a column's are its own order statistics, so the
    same bounds), a column with a NaN replicate then on its own."""
    reps = np.asarray(reps, dtype=float)
    if reps.shape[0] == 0:
        return [_ci(reps[:, j], level) for j in range(reps.shape[1])]
    lo, hi = percentile_ci(reps, level)
    whole = np.isfinite(reps).all(axis=0).tolist()
    return [(a, b) if ok else _ci(reps[:, j], level)
            for j, (a, b, ok) in enumerate(zip(lo.tolist(), hi.tolist(), whole, strict=True))]


def _ci(reps, level) -> tuple[float, float]:
    reps = np.asarray(reps, dtype=float)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return np.nan, np.nan
    lo, hi = percentile_ci(reps, level)
    return float(lo), float(hi)
