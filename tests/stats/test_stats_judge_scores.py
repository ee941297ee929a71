"""Estimators of per-model judge scores: hand-worked cases with the
arithmetic in comments, and choix / scipy as independent references."""

from __future__ import annotations

import numpy as np
import pytest

from clinieval.stats import (
    bt_fit,
    clipped_rubric_mean,
    cluster_outcome_tables,
    paired_bt_cluster_bootstrap,
    repeat_spread,
    resample_counts,
    twoway_draw,
    twoway_ratio_bootstrap,
)


def _shares(values: np.ndarray) -> dict[float, float]:
    keys, counts = np.unique(np.round(values, 12), return_counts=True)
    return dict(zip(keys.tolist(), (counts / values.size).tolist(), strict=True))


def test_twoway_bootstrap_draws_jurors_hand_worked():
    # Two identical cases, two jurors scoring 0 and 1 once per case. Cases
    # carry no spread; the juror draw (2 of 2 with replacement) is
    # (2, 0) w.p. 1/4 -> mean 0, (1, 1) w.p. 1/2 -> 0.5, (0, 2) w.p. 1/4 -> 1.
    sums = np.array([[[0.0, 1.0], [0.0, 1.0]]])
    counts = np.ones_like(sums)
    reps = twoway_ratio_bootstrap(sums, counts, 20_000, np.random.default_rng(0))[:, 0]
    shares = _shares(reps)
    assert set(shares) == {0.0, 0.5, 1.0}
    assert shares[0.5] == pytest.approx(0.5, abs=0.015)
    assert shares[0.0] == pytest.approx(0.25, abs=0.015)


def test_twoway_bootstrap_with_one_juror_is_the_case_bootstrap():
    # One juror; cases with means 0 and 1 (two scores each): the case draw
    # gives 0, 0.5, 1 w.p. 1/4, 1/2, 1/4, the case bootstrap of the ratio.
    sums = np.array([[[0.0], [2.0]]])
    counts = np.full_like(sums, 2.0)
    reps = twoway_ratio_bootstrap(sums, counts, 20_000, np.random.default_rng(1))[:, 0]
    assert _shares(reps)[1.0] == pytest.approx(0.25, abs=0.015)
    assert np.nanmean(reps) == pytest.approx(0.5, abs=0.01)


def test_twoway_bootstrap_keeps_groups_on_one_draw_and_marks_empty_replicates():
    rng = np.random.default_rng(2)
    sums = rng.normal(size=(3, 5, 2))
    counts = np.ones_like(sums)
    reps = twoway_ratio_bootstrap(np.concatenate([sums, sums]),
                                  np.concatenate([counts, counts]), 50, rng)
    assert np.array_equal(reps[:, :3], reps[:, 3:])  # the same draw for every group
    counts[1] = 0.0
    counts[1, 0, 0] = 1.0  # group 1 has a single scored cell: absent in some replicates
    reps = twoway_ratio_bootstrap(sums, counts, 200, np.random.default_rng(3))
    assert np.isnan(reps[:, 1]).any() and np.isfinite(reps[:, 0]).all()
    with pytest.raises(ValueError):
        twoway_ratio_bootstrap(sums[0], counts[0], 10, rng)


def test_a_shared_draw_must_be_of_the_cells_design():
    sums = np.ones((2, 4, 3))
    draw = twoway_draw(4, 3, 50, np.random.default_rng(4))
    assert draw[0].shape == (50, 4) and draw[1].shape == (50, 3)
    assert (draw[0].sum(axis=1) == 4).all() and (draw[1].sum(axis=1) == 3).all()
    reps = twoway_ratio_bootstrap(sums, sums, 50, None, draw)
    np.testing.assert_array_equal(reps, np.ones((50, 2)))
    with pytest.raises(ValueError, match="the draw is for 4 cases and 3 jurors"):
        twoway_ratio_bootstrap(np.ones((2, 5, 3)), np.ones((2, 5, 3)), 50, None, draw)


def test_a_single_precision_draw_has_resample_counts_counts_and_the_same_ratios():
    counts = resample_counts(np.ones(700, dtype=np.int64), 300, np.random.default_rng(6))
    u, v = twoway_draw(700, 1, 300, np.random.default_rng(6), np.float32)
    assert u.dtype == np.float32 and v.dtype == np.float32
    np.testing.assert_array_equal(u, counts)
    rng = np.random.default_rng(7)
    sums = rng.integers(-2, 3, size=(3, 700, 1)).astype(float)
    cells = np.ones_like(sums)
    single = twoway_ratio_bootstrap(sums, cells, 300, None, (u, v))
    double = twoway_ratio_bootstrap(sums, cells, 300, None, (u.astype(float), v.astype(float)))
    np.testing.assert_array_equal(single, double)  # integer totals: exact in float32
    uneven = sums + rng.random(sums.shape) / 3  # not integers: single-precision rounding
    np.testing.assert_allclose(twoway_ratio_bootstrap(uneven, cells, 300, None, (u, v)),
                               twoway_ratio_bootstrap(uneven, cells, 300, None,
                                                      (u.astype(float), v.astype(float))),
                               rtol=1e-5, atol=1e-6)


def test_paired_bt_bootstrap_matches_choix_on_the_full_draw():
    choix = pytest.importorskip("choix")
    rng = np.random.default_rng(4)
    a = rng.integers(0, 4, 300)
    b = (a + rng.integers(1, 4, 300)) % 4
    outcome = (rng.random(300) < 0.3 + 0.1 * a).astype(int)  # 0 = A wins, tie-free
    case = rng.integers(0, 30, 300)
    tables = cluster_outcome_tables(a, b, outcome, case, 4, 30)
    # one cluster holding every vote: each replicate draws it once, the full fit
    whole = tables.sum(axis=0)[None]
    x, y = paired_bt_cluster_bootstrap(whole, whole, 5, rng)
    winner = np.where(outcome == 0, a, b)
    loser = np.where(outcome == 0, b, a)
    ref = choix.opt_pairwise(4, list(zip(winner, loser, strict=True)), alpha=1e-6)
    assert np.allclose(x, ref - ref.mean(), atol=1e-6)
    assert np.allclose(x, y) and np.allclose(x[0], bt_fit(whole[0]))


def test_paired_bt_bootstrap_draws_both_sets_on_the_same_clusters():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 3, 200)
    b = (a + 1 + rng.integers(0, 2, 200)) % 3
    outcome = rng.integers(0, 2, 200)
    tables = cluster_outcome_tables(a, b, outcome, rng.integers(0, 20, 200), 3, 20)
    x, y = paired_bt_cluster_bootstrap(tables, tables, 100, np.random.default_rng(6))
    assert np.allclose(x, y)  # same votes, same draws: the same replicates
    assert np.ptp(x[:, 0]) > 0


def test_repeat_spread_hand_worked():
    # unit 0: 1, 3 -> mean 2, variance (1 + 1) / 1 = 2, changed
    # unit 1: 2, 2, 2 -> variance 0, unchanged; unit 2: judged once, left out
    variance, changed, n = repeat_spread([0, 0, 1, 1, 1, 2], [1, 3, 2, 2, 2, 5])
    assert variance == pytest.approx([2.0, 0.0])
    assert changed.tolist() == [True, False]
    assert n.tolist() == [2, 3]


def test_repeat_spread_matches_numpy_variance():
    rng = np.random.default_rng(7)
    unit = rng.integers(0, 40, 400)
    value = rng.normal(size=400)
    variance, _, _ = repeat_spread(unit, value)
    ref = [np.var(value[unit == u], ddof=1) for u in np.unique(unit) if (unit == u).sum() > 1]
    assert np.allclose(variance, ref)


def test_clipped_rubric_mean_hand_worked():
    # per-example scores -0.5, 0.5, 1.0:
    # reference (clip the mean): (-0.5 + 0.5 + 1) / 3 = 1/3
    # per example: (0 + 0.5 + 1) / 3 = 0.5
    scores = np.array([-0.5, 0.5, 1.0])
    ref, ref_reps = clipped_rubric_mean(scores, 500, np.random.default_rng(8), "mean")
    each, _ = clipped_rubric_mean(scores, 500, np.random.default_rng(8), "example")
    assert ref == pytest.approx(1 / 3) and each == pytest.approx(0.5)
    assert ((ref_reps >= 0) & (ref_reps <= 1)).all()
    # a mean below zero is clipped to 0: (-1 - 0.5 + 0.25) / 3 < 0
    low, _ = clipped_rubric_mean(np.array([-1.0, -0.5, 0.25]), 50, np.random.default_rng(9))
    assert low == 0.0
    with pytest.raises(ValueError):
        clipped_rubric_mean(scores, 10, np.random.default_rng(0), "answer")
