"""How often do judge-calibrated 95% intervals cover the clinicians' truth?

One model, 4,000 judged answers in 8 specialties; clinicians (a pool of 60)
rate a share of them, three per answer; score = clip(round(0.8 + answer +
rater leniency + noise), -2, 2) with SDs 0.8 / 0.4 / 0.7 (issue 32). The
truths are over the population of answers and raters, computed exactly:
mean score of ratings, Fail % of ratings (score <= -1) and dangerous
answers % (at least 2 of an answer's 3 clinicians fail it).

Judges score every answer on the same scale: ``useless`` (independent of
the answer), ``fair``, ``good``, and ``biased`` (good, but never fails an
answer in two specialties: blind to harms there). The judge's score
predicts the mean score; its fail verdict predicts Fail % and dangerous
answers %. Clinicians rate a uniform sample of 1%, 5% or 20% of answers, or
(``nonuniform``) a Poisson sample with 3x the probability for answers the
judge scores near the threshold (-1 or 0), mean 5%, weighted by the
recorded probabilities; ``recorded`` is the same sample with the
probabilities known for the rated answers only, as a targeted study's
leases record them (the judge's mean then runs over every answer).

Per row and quantity (means over snapshots; the gains and bounds are
medians): coverage of the calibrated two-way interval
(:func:`clinieval.stats.calibrated.calibrated_rating_mean` /
``calibrated_answer_mean``), of its iid plug-in interval and of the
clinicians-alone interval; mean lambda and rho; the gain in effective
clinician sample size (clinicians-alone width / calibrated width, squared,
at equal clinician n), by two-way widths and by answer-clustered variances, beside the bound
``1 / (1 - rho^2 N / (N + n))`` and the design bound (the same, with the
rater variance the judge cannot remove).

    python benchmarks/coverage_calibrated.py [--reps 200] [--bootstrap 1000] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import binom, norm

from clinieval.stats.calibrated import (
    CalibratedMean,
    calibrated_answer_mean,
    calibrated_rating_mean,
)

ANSWERS, SPECIALTIES, RATERS, PER_ANSWER = 4000, 8, 60, 3
MU, SD_ANSWER, SD_RATER, SD_NOISE, TAU = 0.8, 0.8, 0.4, 0.7, -1
JUDGES = {"useless": (0.0, 1.0), "fair": (1.0, 1.0), "good": (1.0, 0.3), "biased": (1.0, 0.3)}
BLIND = (0, 1)  # specialties where the biased judge never fails an answer
QUANTITIES = ("mean", "fail", "dangerous")


def truths() -> dict[str, float]:
    """Population values over answers and raters (Gauss-Hermite over the answer effect)."""
    total = np.sqrt(SD_ANSWER**2 + SD_RATER**2 + SD_NOISE**2)
    edges = np.arange(-1.5, 2.0)  # score k when MU + X lies in (k - 0.5, k + 0.5]
    cdf = norm.cdf((edges - MU) / total)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    mean = float(probs @ np.arange(-2, 3))
    x, w = np.polynomial.hermite_e.hermegauss(80)
    p_fail = norm.cdf((TAU + 0.5 - MU - SD_ANSWER * x) / np.hypot(SD_RATER, SD_NOISE))
    dangerous = float(w @ binom.sf(1, PER_ANSWER, p_fail) / w.sum())
    return {"mean": mean, "fail": float(cdf[1]), "dangerous": dangerous}


def simulate(rng, judge: str, share: float, sampling: str):
    """One snapshot: predictions per answer and the clinicians' ratings."""
    effect = rng.normal(0, SD_ANSWER, ANSWERS)
    leniency = rng.normal(0, SD_RATER, RATERS)
    slope, noise = JUDGES[judge]
    latent = slope * effect if slope else rng.normal(0, SD_ANSWER, ANSWERS)
    score = np.clip(np.round(MU + latent + rng.normal(0, noise, ANSWERS)), -2, 2)
    if judge == "biased":
        blind = np.isin(np.arange(ANSWERS) % SPECIALTIES, BLIND)
        score = np.where(blind, np.maximum(score, 0), score)
    if sampling == "uniform":
        labelled, inclusion = rng.choice(ANSWERS, int(share * ANSWERS), replace=False), None
    else:
        weight = np.where(np.isin(score, (-1, 0)), 3.0, 1.0)
        inclusion = np.minimum(share * ANSWERS * weight / weight.sum(), 1.0)
        labelled = np.flatnonzero(rng.random(ANSWERS) < inclusion)
        if sampling == "recorded":
            inclusion = np.where(np.isin(np.arange(ANSWERS), labelled), inclusion, np.nan)
    answer = np.repeat(labelled, PER_ANSWER)
    rater = rng.permuted(np.tile(np.arange(RATERS), (labelled.size, 1)), axis=1)[:, :PER_ANSWER]
    rater = rater.ravel()
    rating = np.clip(np.round(MU + effect[answer] + leniency[rater]
                              + rng.normal(0, SD_NOISE, answer.size)), -2, 2)
    return score, answer, rater, rating, inclusion


def estimates(rng, snapshot, B: int) -> dict[str, CalibratedMean]:
    score, answer, rater, rating, inclusion = snapshot
    verdict = (score <= TAU).astype(float)
    fails = np.bincount(answer, weights=rating <= TAU, minlength=ANSWERS)
    rated = np.bincount(answer, minlength=ANSWERS) > 0
    dangerous = np.where(rated, (fails >= 2).astype(float), np.nan)
    common = dict(rng=rng, inclusion=inclusion, B=B)
    return {
        "mean": calibrated_rating_mean(score, answer, rater, rating, bounds=(-2, 2), **common),
        "fail": calibrated_rating_mean(verdict, answer, rater, (rating <= TAU).astype(float),
                                       bounds=(0, 1), **common),
        "dangerous": calibrated_answer_mean(verdict, answer, rater, answer_value=dangerous,
                                            bounds=(0, 1), **common),
    }


def run_row(judge, share, sampling, reps, B, seed, truth):
    """Coverage and gains of one setting; snapshots without an estimate
    (see :class:`clinieval.stats.calibrated.NoEstimate`) are counted apart."""
    rng = np.random.default_rng(seed)
    rows = {q: [] for q in QUANTITIES}
    skipped = dict.fromkeys(QUANTITIES, 0)
    for _ in range(reps):
        out = estimates(rng, simulate(rng, judge, share, sampling), B)
        for q, r in out.items():
            if not isinstance(r, CalibratedMean):
                skipped[q] += 1  # (e.g. no clinician failed any rated answer)
                continue
            t = truth[q]
            rows[q].append([r.lower <= t <= r.upper, r.iid_lower <= t <= r.iid_upper,
                            r.clinicians_lower <= t <= r.clinicians_upper, r.lam, r.rho,
                            r.gain, r.answer_gain, r.bound, r.design_bound,
                            r.upper - r.lower, r.clinicians_upper - r.clinicians_lower])
    return {q: np.asarray(v, dtype=float) for q, v in rows.items()}, skipped


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=None, help="snapshots per row (200)")
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates (1000)")
    parser.add_argument("--quick", action="store_true", help="5%% rows only, 40 snapshots, B=300")
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--only", default="",
                        help="rows whose 'judge share sampling' contains this")
    args = parser.parse_args(argv)
    reps = args.reps or (40 if args.quick else 200)
    B = args.bootstrap or (300 if args.quick else 1000)
    shares = (0.05,) if args.quick else (0.01, 0.05, 0.20)
    settings = [(j, s, "uniform") for j in JUDGES for s in shares]
    settings += [(j, 0.05, sampling) for sampling in ("nonuniform", "recorded")
                 for j in ("fair", "good", "biased")]
    truth = truths()
    print(f"truth: mean {truth['mean']:.4f}, Fail % {truth['fail']:.4f}, dangerous % "
          f"{truth['dangerous']:.4f}; {reps} snapshots per row, B = {B}, seed {args.seed}")
    print(f"{'judge':8} {'share':>5} {'sampling':10} {'quantity':9} {'cover':>6} {'iid':>6} "
          f"{'alone':>6} {'lambda':>6} {'rho':>5} {'gain':>5} {'ansgain':>7} {'bound':>5} "
          f"{'design':>6} {'width':>6} {'alone_w':>7}")
    start = time.perf_counter()
    for i, (judge, share, sampling) in enumerate(settings):
        if args.only not in f"{judge} {share:.0%} {sampling}":
            continue
        rows, skipped = run_row(judge, share, sampling, reps, B, args.seed + i, truth)
        for q in QUANTITIES:
            m = rows[q].mean(axis=0)
            m[5:9] = np.median(rows[q][:, 5:9], axis=0)  # ratios: a few tiny cells dominate means
            print(f"{judge:8} {share:5.0%} {sampling:10} {q:9} {m[0]:6.1%} {m[1]:6.1%} "
                  f"{m[2]:6.1%} {m[3]:6.2f} {m[4]:5.2f} {m[5]:5.2f} {m[6]:7.2f} {m[7]:5.2f} "
                  f"{m[8]:6.2f} {m[9]:6.3f} {m[10]:7.3f}"
                  + (f"  ({skipped[q]} without estimate)" if skipped[q] else ""))
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
