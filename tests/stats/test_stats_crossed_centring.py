"""The two-way variance of a per-answer share undoes the centring of its
influences at the estimate (:func:`clinieval.stats.crossed_share_variance`)."""

from __future__ import annotations

import numpy as np
import pytest

from clinieval.simulate import Design, simulate
from clinieval.stats import crossed_share_variance


def test_share_variance_divides_the_raw_sum_by_the_kept_share():
    # Six answers of one group, each its own case, one rater each: rater 0
    # judged answers 0-2 (all flagged), rater 1 answers 3-4 and rater 2
    # answer 5 (none flagged). Share 0.5, z = +-1/12; rater totals 3/12,
    # -2/12, -1/12 square to 14/144; case and cell sums are both 6/144, so
    # the raw two-way sum is 14/144. Weights 1/6: the raters' squared
    # weight totals are (9 + 4 + 1) / 36, the cases' and cells' 6/36 each,
    # so 1 - 14/36 = 22/36 is kept and twoway = (14/144) / (22/36) = 7/44
    # (the G / (G - 1) factors gave 3/2 * 14/144 = 7/48).
    flags = np.array([1.0, 1, 1, 0, 0, 0])
    var = crossed_share_variance(flags, np.zeros(6, int), 1, np.arange(6), np.arange(6),
                                 np.array([0, 0, 0, 1, 1, 2]))
    assert var.twoway == pytest.approx([7 / 44])
    assert var.rows == pytest.approx([1.5 * 14 / 144])  # one-way fields keep the factors
    assert var.cols == pytest.approx([1.2 * 6 / 144])


def test_share_variance_matches_the_spread_of_shares_with_many_answers_per_rater():
    # 400 answers of each of 3 models, 40 clinicians, 3 per answer: each
    # rates 30 answers of every model, so its leniency moves many flags at
    # once. Over 2,500 planted snapshots the mean two-way variance of the
    # share of answers any rater scored <= -1 is 1.03-1.17 of the shares'
    # own variance over eight seeds; with the G / (G - 1) factors instead of the
    # centring correction it was 0.85-0.97 (mean over models 0.90-0.93).
    design = Design(answers=400, raters=40, answer_sd=0.8, rater_sd=0.4, noise_sd=0.7,
                    effects=(1.2, 0.5, 0.0))
    m, size = len(design.effects), design.answers * len(design.effects)
    groups, cases = np.arange(size) % m, np.arange(size) // m
    rng = np.random.default_rng(0)
    shares, variances = [], []
    for _ in range(2500):
        ratings, _ = simulate(design, rng)
        answer = ratings.case * m + ratings.model
        flags = (np.bincount(answer, weights=ratings.score <= -1, minlength=size) > 0)
        shares.append(np.bincount(groups, weights=flags, minlength=m) / design.answers)
        variances.append(crossed_share_variance(flags.astype(float), groups, m, cases, answer,
                                                ratings.rater).twoway)
    ratio = np.mean(variances, axis=0) / np.var(shares, axis=0, ddof=1)
    assert 0.97 < ratio.mean() < 1.2, ratio
    assert (ratio > 0.95).all() and (ratio < 1.3).all(), ratio
