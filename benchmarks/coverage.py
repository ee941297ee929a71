"""How often do the audit's 95% intervals cover the truth?

Two simulations:

* **crossed** (the design of real studies): every model answers the same
  cases, each answer is rated by a few raters from one pool shared by all
  models, and score = clip(round(model + answer + rater leniency + noise),
  -2, 2) with SDs 0.6 / 0.5 / 0.6 (see :mod:`clinieval.simulate`). The
  truth is each model's expected score and P(score <= -1) over the
  population of answers and raters, computed exactly. Sizes vary one at a
  time around 40 answers per model, 30 raters, 3 raters per answer. The
  intervals come from the same :mod:`clinieval.stats` functions the audit
  calls, for each ``--cluster`` design: ``none`` (rating-level, as in the
  MOOVE paper), ``pigeonhole`` (two-way, uncalibrated) and ``twoway`` (the
  default: calibrated pigeonhole; Fail% by a design-effect Wilson
  interval). The gap "preference leader's Fail% minus the lowest Fail%" is
  checked with the selections fixed at the observed models and with the
  selection-adjusted interval, also where the two safest models are tied
  ("tied").
* **independent**: the same distributions with all variance in the rating
  noise: a row of the table above, and (``--audit N``) N snapshots with one
  rating per answer and Bradley-Terry votes through the whole audit.
* **per rater** (``--per-rater N``): dangerous % only, where every
  clinician rates many answers of each model (400-1,000 answers per model,
  40-60 clinicians, 3 per answer, SDs 0.8 / 0.4 / 0.7), through the same
  two-way variance and Wilson interval as the audit's
  ``Context.answer_share_ci``; with misses below and above the truth and
  the mean variance over the estimates' own.

    python benchmarks/coverage.py [--snapshots 200] [--bootstrap 1000] [--audit 100]
                                  [--per-rater 3000]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from clinieval.audit import audit
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.simulate import (
    MODEL_EFFECTS,
    STRENGTHS,
    Design,
    any_fail_truth,
    score_probabilities,
    simulate,
    truth,
)
from clinieval.stats import (
    bootstrap_mean_counts,
    bt_fit,
    bt_twoway_bootstrap,
    crossed_ratio_bootstrap,
    crossed_share_variance,
    design_effect,
    outcome_table,
    percentile_ci,
    selected_gap,
    selection_adjusted_gap_ci,
    t_over_z,
    wilson_ci,
    wilson_design_ci,
)
from clinieval.testing import snapshot_from_rows

SCORE_VALUES = np.arange(-2, 3, dtype=float)
FAIL_VALUES = (SCORE_VALUES <= -1).astype(float)
M = len(MODEL_EFFECTS)  # the designs below keep six models
BASE = Design(votes=600)
SIZES = [("answers", 20), ("answers", 40), ("answers", 100), ("raters", 10),
         ("raters", 20), ("raters", 100), ("per_answer", 2), ("per_answer", 4)]
TIED = (1.2, 1.2, 0.7, 0.5, 0.3, 0.0)  # two equally safe models: selection matters


# --- the crossed design, through the stats functions -------------------------------


def cell_stats(ratings):
    """Cells (rater, case) with per-model score counts: rows, cols, (K, M * 5)."""
    key = ratings.rater.astype(np.int64) * (ratings.case.max() + 1) + ratings.case
    cells, cell = np.unique(key, return_inverse=True)
    column = ratings.model * 5 + ratings.score + 2
    stats = sp.csr_matrix((np.ones(cell.size), (cell, column)), shape=(cells.size, M * 5))
    return cells // (ratings.case.max() + 1), cells % (ratings.case.max() + 1), stats


def ratio_maps():
    """Maps from score counts to (mean sums, fail counts) and to rating counts."""
    blocks = sp.block_diag([SCORE_VALUES[:, None]] * M)
    fails = sp.block_diag([FAIL_VALUES[:, None]] * M)
    ones = sp.block_diag([np.ones((5, 1))] * M)
    return sp.hstack([blocks, fails]).tocsr(), sp.hstack([ones, ones]).tocsr()


def intervals(ratings, votes, B, rng):
    """Per design: (mean lo, hi), (fail lo, hi) arrays over models; and gaps."""
    rows, cols, stats = cell_stats(ratings)
    counts = np.asarray(stats.sum(axis=0)).reshape(M, 5)
    n = counts.sum(axis=1)
    out = {"none": (percentile_ci(bootstrap_mean_counts(counts, SCORE_VALUES, B, rng)),
                    percentile_ci(bootstrap_mean_counts(counts, FAIL_VALUES, B, rng)))}
    num_map, den_map = ratio_maps()
    reps, var = crossed_ratio_bootstrap(rows, cols, stats, num_map, den_map, B, rng)
    est = np.concatenate([counts @ SCORE_VALUES, counts @ FAIL_VALUES]) / np.tile(n, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.sqrt(var.twoway / var.pigeonhole) * t_over_z(var.clusters)
    factor = np.where(var.pigeonhole > 0, factor, 1.0)
    raw = est + (reps - est) / factor
    out["pigeonhole"] = (percentile_ci(raw[:, :M]), percentile_ci(raw[:, M:]))
    spread = counts @ SCORE_VALUES**2 / n - est[:M] ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        fallback = var.twoway[:M] * n / spread  # the mean score's design effect
    deff = design_effect(var.twoway[M:], est[M:], n, fallback) * t_over_z(var.clusters[M:]) ** 2
    out["twoway"] = (percentile_ci(reps[:, :M]), wilson_design_ci(est[M:] * n, n, deff))
    out["twoway, percentile Fail%"] = (out["twoway"][0], percentile_ci(reps[:, M:]))
    return out, dangerous(ratings), gaps(votes, est[M:], reps[:, M:], B, rng)


def dangerous(ratings):
    """Share of answers failed by any of their raters: Wilson over answers
    (the audit's interval before) and Wilson on the two-way effective n."""
    k, n, _, twoway = dangerous_share(ratings, M)
    return {"none": wilson_ci(k, n), "twoway": twoway}


def dangerous_share(ratings, models: int):
    """Dangerous answers (any rating <= -1) per model as the audit's
    ``Context.answer_share_ci`` finds them: ``k``, ``n``, the two-way
    variance and its Wilson interval on the design-effect n."""
    answer = ratings.case * models + ratings.model
    size = (ratings.case.max() + 1) * models
    flags = (np.bincount(answer, weights=ratings.score <= -1, minlength=size) > 0).astype(float)
    groups, cases = np.arange(size) % models, np.arange(size) // models
    k = np.bincount(groups, weights=flags, minlength=models)
    n = np.bincount(groups, minlength=models)
    var = crossed_share_variance(flags, groups, models, cases, answer, ratings.rater)
    deff = design_effect(var.twoway, k / n, n) * t_over_z(var.clusters) ** 2
    return k, n, var.twoway, wilson_design_ci(k, n, deff)


def gaps(votes, fail, fail_reps, B, rng):
    """Gap intervals: selections fixed at the observed models, and re-made."""
    table = outcome_table(votes.a, votes.b, votes.outcome, M)
    strength = bt_fit(table)
    bt_reps = bt_twoway_bootstrap(votes.a, votes.b, votes.outcome, votes.rater, votes.case, M,
                                  B, rng)
    leader, safest = int(np.argmax(strength)), int(np.argmin(fail))
    fixed = percentile_ci(fail_reps[:, leader] - fail_reps[:, safest])
    _, lo, hi = selection_adjusted_gap_ci(strength, bt_reps, fail, fail_reps)
    return {"fixed selection (before)": fixed, "selection-adjusted (new)": (lo, hi)}


def crossed_coverage(design, snapshots, B, crossed=True):
    rng = np.random.default_rng(2026)
    mean_true, fail_true = truth(design)
    gap_true = float(selected_gap(np.asarray(STRENGTHS), fail_true))
    danger_true = any_fail_truth(design, crossed=crossed)
    hits, widths, gap_hits = {}, {}, {}
    for _ in range(snapshots):
        ratings, votes = simulate(design, rng, crossed=crossed)
        found, danger, gap = intervals(ratings, votes, B, rng)
        for name, ci in danger.items():
            hits.setdefault((name, "dangerous"), []).append(
                (ci[0] <= danger_true) & (danger_true <= ci[1]))
        for name, (mean_ci, fail_ci) in found.items():
            for what, ci, true in (("mean", mean_ci, mean_true), ("fail", fail_ci, fail_true)):
                hits.setdefault((name, what), []).append((ci[0] <= true) & (true <= ci[1]))
                widths.setdefault((name, what), []).append(ci[1] - ci[0])
        for name, (lo, hi) in gap.items():
            gap_hits.setdefault(name, []).append(lo <= gap_true <= hi)
    return hits, widths, gap_hits


def pct(values) -> str:
    values = np.asarray(values).ravel()
    k, n = int(values.sum()), values.size
    lo, hi = wilson_ci(k, n)
    return f"{100 * k / n:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]"


def report_crossed(args) -> None:
    print(f"crossed design: {M} models, SDs answer/rater/noise 0.6/0.5/0.6, {args.snapshots}"
          f" snapshots per row, B = {args.bootstrap}; coverage [Wilson 95%] and mean width")
    print(f"{'setting':<34} {'design':<26} {'mean':>17} {'width':>6}"
          f" {'Fail%':>17} {'width':>6} {'lowest Fail%':>17}")
    rows = [("crossed", replace(BASE, **{field: value})) for field, value in SIZES]
    rows.append(("tied", replace(BASE, effects=TIED)))
    rows.append(("independent", BASE))
    for kind, design in rows:
        start = time.perf_counter()
        hits, widths, gap_hits = crossed_coverage(design, args.snapshots, args.bootstrap,
                                                  crossed=kind != "independent")
        label = (f"{kind} {design.answers} ans x {design.raters} raters,"
                 f" {design.per_answer}/ans")
        for name in ("none", "pigeonhole", "twoway", "twoway, percentile Fail%"):
            mean, fail = np.array(hits[name, "mean"]), np.array(hits[name, "fail"])
            print(f"{label:<34} {name:<26} {pct(mean)} {np.mean(widths[name, 'mean']):6.3f}"
                  f" {pct(fail)} {100 * np.mean(widths[name, 'fail']):5.1f}p"
                  f" {pct(fail[:, 0])}"
                  f" {pct(hits[name, 'dangerous']) if (name, 'dangerous') in hits else ''}")
            label = ""
        for name, values in gap_hits.items():
            print(f"{'':<34} gap CI, {name:<18} {pct(values)}")
        print(f"{'':<34} ({time.perf_counter() - start:.0f} s)")


# --- many answers per rater: dangerous % only -------------------------------------------

PER_RATER = Design(answers=800, raters=60, answer_sd=0.8, rater_sd=0.4, noise_sd=0.7,
                   effects=(2.0, 1.2, 0.5, 0.0))
PER_RATER_SIZES = [(800, 60), (400, 40), (1000, 50)]


def report_per_rater(args) -> None:
    """Dangerous % where each clinician rates many answers of every model
    (40 of 800 at 60 clinicians, 3 per answer): coverage with the misses
    below and above the truth, and the mean two-way variance over the
    estimates' variance across snapshots. The truth is exact (see
    :func:`clinieval.simulate.any_fail_truth`): given the answer effect,
    an answer's three distinct raters fail independently."""
    print(f"\nmany answers per rater, dangerous % (any rating <= -1): SDs answer/rater/noise"
          f" 0.8/0.4/0.7, {len(PER_RATER.effects)} models, {args.per_rater} snapshots per"
          " row, seed 2028")
    print(f"{'setting':<28} {'truth %':>7} {'coverage [Wilson 95%]':>22} {'below':>6}"
          f" {'above':>6} {'var ratio':>9}")
    for answers, raters in PER_RATER_SIZES:
        design = replace(PER_RATER, answers=answers, raters=raters)
        models = len(design.effects)
        rng = np.random.default_rng(2028)
        true = any_fail_truth(design)
        start = time.perf_counter()
        shares, variances, below, above = [], [], [], []
        for _ in range(args.per_rater):
            ratings, _ = simulate(design, rng)
            k, n, var, (lo, hi) = dangerous_share(ratings, models)
            shares.append(k / n)
            variances.append(var)
            below.append(hi < true)
            above.append(lo > true)
        ratio = np.mean(variances, axis=0) / np.var(shares, axis=0, ddof=1)
        below, above = np.array(below), np.array(above)
        label = f"{answers} ans x {raters} raters, 3/ans"
        for m in range(models):
            print(f"{label:<28} {100 * true[m]:7.1f} {pct(~below[:, m] & ~above[:, m]):>22}"
                  f" {100 * below[:, m].mean():5.1f}% {100 * above[:, m].mean():5.1f}%"
                  f" {ratio[m]:9.3f}")
            label = ""
        print(f"{'':<28} ({time.perf_counter() - start:.0f} s)")


# --- the independent design, through the whole audit -----------------------------------


def independent_snapshot(rng: np.random.Generator, cases: int, votes: int):
    """One rating per answer from one rater; votes from Bradley-Terry."""
    probs = score_probabilities(MODEL_EFFECTS, BASE.total_sd)
    answers, ratings, prefs = [], [], []
    for c in range(cases):
        for m in range(M):
            answer = f"a{c}-{m}"
            answers.append({"answer_id": answer, "case_id": f"c{c}", "model_id": f"m{m}"})
            ratings.append({"rating_id": len(ratings), "answer_id": answer, "rater_id": "r0",
                            "criterion_id": "harmlessness", "revision": 0,
                            "score": int(rng.choice(5, p=probs[m]) - 2)})
    for v in range(votes):
        c = int(rng.integers(cases))
        a, b = rng.choice(M, 2, replace=False)
        won = rng.random() < expit(STRENGTHS[a] - STRENGTHS[b])
        prefs.append({"preference_id": v, "case_id": f"c{c}", "answer_a_id": f"a{c}-{a}",
                      "answer_b_id": f"a{c}-{b}", "choice": "A" if won else "B"})
    return snapshot_from_rows({
        "cases": [{"case_id": f"c{c}", "specialty": "General"} for c in range(cases)],
        "models": [{"model_id": f"m{m}"} for m in range(M)], "answers": answers,
        "raters": [{"rater_id": "r0"}], "criteria": rubric_to_rows(load_rubric()),
        "ratings": ratings, "preferences": prefs})


def report_audit(args) -> None:
    rng = np.random.default_rng(2027)
    mean_true, fail_true = truth(BASE)
    strength = np.asarray(STRENGTHS) - np.mean(STRENGTHS)
    hits = {}
    start = time.perf_counter()
    for i in range(args.audit):
        result = audit(independent_snapshot(rng, 60, 600), bootstrap=args.bootstrap, seed=i)
        table = result["model_summary"].tables["by_criterion"].sort_values("model")
        bt = result["bradley_terry"].tables["strengths"].sort_values("model")
        for name, frame, col, true in (("rubric mean", table, "mean", mean_true),
                                       ("Fail%", table, "fail_pct", 100 * fail_true),
                                       ("Bradley-Terry strength", bt, "bt", strength)):
            lo, hi = frame[f"{col}_lo"].to_numpy(), frame[f"{col}_hi"].to_numpy()
            hits.setdefault(name, []).extend((lo <= true) & (true <= hi))
    print(f"\nindependent ratings through the whole audit (default design): {args.audit}"
          f" snapshots x {M} models, 60 ratings and 600 votes each"
          f" ({time.perf_counter() - start:.0f} s)")
    for name, values in hits.items():
        print(f"{name:<24} {pct(values)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--audit", type=int, default=0,
                        help="snapshots of the independent design through the whole audit")
    parser.add_argument("--per-rater", type=int, default=0,
                        help="snapshots per row of dangerous %% with many answers per rater")
    args = parser.parse_args()
    if args.snapshots:
        report_crossed(args)
    if args.per_rater:
        report_per_rater(args)
    if args.audit:
        report_audit(args)


if __name__ == "__main__":
    main()
