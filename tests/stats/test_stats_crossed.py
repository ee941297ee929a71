"""The two-way (raters x cases) estimators: weights against theory, variances
against statsmodels and hand-worked cases, intervals against references."""

import numpy as np
import pytest
import scipy.sparse as sp
import statsmodels.api as sm
from statsmodels.stats.proportion import proportion_confint

from clinieval.stats import (
    bt_bootstrap,
    bt_fit,
    bt_twoway_bootstrap,
    collapse_votes,
    count_ratio_variance,
    crossed_ratio_bootstrap,
    crossed_ratio_variance,
    crossed_share_variance,
    design_effect,
    grouped_ratio_variance,
    influence_variance,
    outcome_table,
    pigeonhole_totals,
    pigeonhole_weights,
    selected_gap,
    selection_adjusted_gap_ci,
    t_over_z,
    unique_codes,
    wilson_ci,
    wilson_design_ci,
)


def crossed_data(seed=3, raters=12, cases=40, per_case=3):
    """Ratings with rater and case effects; one rating per (rater, case) cell."""
    rng = np.random.default_rng(seed)
    rater = np.argsort(rng.random((cases, raters)), axis=1)[:, :per_case].ravel()
    case = np.repeat(np.arange(cases), per_case)
    y = (rng.normal(0, 0.6, cases)[case] + rng.normal(0, 0.5, raters)[rater]
         + rng.normal(0, 0.6, case.size))
    return rater, case, y


def test_cell_weights_have_the_pigeonhole_moments():
    # Six cells on a 2 x 3 grid; stats = identity, so totals are the cell
    # weights U_r * V_c with U ~ Multinomial(2, 1/2), V ~ Multinomial(3, 1/3):
    # E[U^2] = 1 + (1 - 1/2) = 1.5, E[V^2] = 1 + (1 - 1/3) = 5/3,
    # E[U_r U_r'] = 1 - 1/2, E[V_c V_c'] = 1 - 1/3.
    rows, cols = np.repeat([0, 1], 3), np.tile([0, 1, 2], 2)
    w = pigeonhole_totals(rows, cols, np.eye(6), 200_000, np.random.default_rng(0))
    assert np.allclose(w.mean(axis=0), 1.0, atol=0.01)
    cov = np.cov(w, rowvar=False)
    assert cov[0, 0] == pytest.approx(1.5 * 5 / 3 - 1, abs=0.02)  # same cell: 1.5
    assert cov[0, 1] == pytest.approx(1.5 * 2 / 3 - 1, abs=0.02)  # same rater: 0
    assert cov[0, 3] == pytest.approx(0.5 * 5 / 3 - 1, abs=0.02)  # same case: -1/6
    assert cov[0, 4] == pytest.approx(0.5 * 2 / 3 - 1, abs=0.02)  # neither: -2/3


def test_one_rating_per_rater_and_case_reduces_to_the_iid_variance():
    # Four ratings y = 1, 2, 3, 6, each its own rater and its own case: the
    # mean is 3, z = (y - 3) / 4 = -0.5, -0.25, 0, 0.75, sum z^2 = 0.875.
    # Rows, columns and cells are the same clusters, so
    # twoway = rows + cols - cells = rows = 4/3 * 0.875 = 7/6 = s^2 / n
    # (s^2 = (4 + 1 + 0 + 9) / 3), and the pigeonhole's expected variance is
    # (1 - 1/4) 0.875 + (1 - 1/4) 0.875 + 0.875 = 2.1875.
    y = np.array([[1.0], [2.0], [3.0], [6.0]])
    var = crossed_ratio_variance(np.arange(4), np.arange(4), y, np.ones((4, 1)))
    assert var.rows == pytest.approx([7 / 6]) and var.cols == pytest.approx([7 / 6])
    assert var.twoway == pytest.approx([7 / 6])
    assert var.twoway == pytest.approx(np.var(y, ddof=1) / 4)
    assert var.pigeonhole == pytest.approx([2.1875])


def test_twoway_variance_matches_statsmodels_two_way_clustering():
    rater, case, y = crossed_data()
    var = crossed_ratio_variance(rater, case, y[:, None], np.ones((y.size, 1)))
    fit = sm.OLS(y, np.ones(y.size)).fit(cov_type="cluster",
                                         cov_kwds={"groups": np.column_stack([rater, case])})
    assert var.twoway[0] > max(var.rows[0], var.cols[0])  # the floor does not bind here
    assert var.twoway[0] == pytest.approx(fit.cov_params()[0, 0], rel=1e-9)
    by_rater = sm.OLS(y, np.ones(y.size)).fit(cov_type="cluster", cov_kwds={"groups": rater})
    assert var.rows[0] == pytest.approx(by_rater.cov_params()[0, 0], rel=1e-9)


def test_replicates_have_the_twoway_variance_and_raw_ones_the_pigeonhole_variance():
    rater, case, y = crossed_data(seed=5, raters=30, cases=80)
    stats = np.column_stack([y, np.ones_like(y)])
    num, den = np.array([[1.0], [0.0]]), np.array([[0.0], [1.0]])
    reps, var = crossed_ratio_bootstrap(rater, case, stats, num, den, 4000,
                                        np.random.default_rng(1))
    target = var.twoway[0] * t_over_z(var.clusters, 0.95)[0] ** 2
    assert np.var(reps) == pytest.approx(target, rel=0.1)
    totals = pigeonhole_totals(rater, case, stats, 4000, np.random.default_rng(2))
    assert np.var(totals[:, 0] / totals[:, 1]) == pytest.approx(var.pigeonhole[0], rel=0.1)
    assert var.pigeonhole[0] > 1.2 * var.twoway[0]  # why the calibration is needed


def test_t_over_z_matches_the_quantile_ratio():
    # t(9) 97.5% quantile 2.262157, normal 1.959964.
    assert t_over_z(np.array([10]))[0] == pytest.approx(2.262157 / 1.959964, rel=1e-6)
    assert t_over_z(np.array([1]))[0] == 1.0


@pytest.mark.parametrize(("k", "n", "deff"), [(3, 120, 1.0), (3, 120, 2.5), (0, 60, 3.0),
                                             (40, 90, 1.7)])
def test_wilson_design_interval_is_wilson_on_the_effective_n(k, n, deff):
    lo, hi = wilson_design_ci(k, n, deff)
    ref = proportion_confint(k / deff, n / deff, method="wilson")
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert wilson_design_ci(k, n, 0.5) == pytest.approx(wilson_ci(k, n))  # deff floored at 1


def test_design_effect_is_the_variance_ratio_with_a_fallback():
    # p = 0.1, n = 100: binomial variance 0.0009; 0.0027 / 0.0009 = 3.
    assert design_effect(0.0027, 0.1, 100) == pytest.approx(3.0)
    assert design_effect(0.0, 0.0, 100, fallback=2.2) == pytest.approx(2.2)
    assert design_effect(0.0001, 0.1, 100) == 1.0


def test_selected_gap_reselects_per_row():
    strengths = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.0]])
    rates = np.array([[10.0, 30.0, 5.0], [10.0, 30.0, 5.0]])
    # row 0: leader 1 (30) minus min 5 = 25; row 1: leader 0 (10) - 5 = 5.
    assert selected_gap(strengths, rates) == pytest.approx([25.0, 5.0])
    # model 2 not eligible: min over 10 and 30.
    assert selected_gap(strengths, rates, np.array([True, True, False])) == pytest.approx(
        [20.0, 0.0])


def test_selected_gap_is_nan_where_a_row_has_nothing_to_pick():
    rates = np.array([[10.0, 30.0], [np.nan, np.nan], [10.0, 30.0]])
    strengths = np.array([[0.0, 1.0], [0.0, 1.0], [np.nan, np.nan]])
    gaps = selected_gap(strengths, rates)
    assert gaps[0] == pytest.approx(20.0) and np.isnan(gaps[1:]).all()
    gap, lo, hi = selection_adjusted_gap_ci(strengths[0], strengths[2:], rates[0], rates[2:])
    assert gap == pytest.approx(20.0) and np.isnan(lo) and np.isnan(hi)


def test_selection_adjusted_gap_uses_the_reselected_replicates():
    rng = np.random.default_rng(0)
    strengths = np.array([0.0, 1.0, 0.0])
    rates = np.array([5.0, 20.0, 6.0])
    rate_reps = rates + rng.normal(0, 2, (2000, 3))
    leader_reps = strengths + rng.normal(0, 0.05, (2000, 3))
    gap, lo, hi = selection_adjusted_gap_ci(strengths, leader_reps, rates, rate_reps)
    assert gap == 15.0
    reselected = rate_reps[:, 1] - rate_reps[:, [0, 2]].min(axis=1)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(reselected, [0.025, 0.975])))
    fixed = np.quantile(rate_reps[:, 1] - rate_reps[:, 0], [0.025, 0.975])
    assert hi > fixed[1]  # the near-tie of models 0 and 2 widens the interval upward


def test_bt_twoway_replicates_centre_on_the_fit_and_widen_with_rater_effects():
    rng = np.random.default_rng(4)
    n = 3000
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    rater = rng.integers(0, 15, n)
    # Each rater prefers model 0 or model 1 by a rater-specific margin.
    taste = rng.normal(0, 1.0, 15)[rater]
    logit = np.array([0.3, 0.0, -0.1, -0.2])[a] - np.array([0.3, 0.0, -0.1, -0.2])[b]
    logit += taste * ((a == 0).astype(float) - (b == 0))
    outcome = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), 0, 1)
    case = rng.integers(0, 400, n)
    reps = bt_twoway_bootstrap(a, b, outcome, rater, case, 4, 400, rng)
    assert reps.shape == (400, 4) and np.allclose(reps.sum(axis=1), 0, atol=1e-9)
    fit = bt_fit(outcome_table(a, b, outcome, 4))
    assert np.allclose(reps.mean(axis=0), fit, atol=0.1)
    singles = bt_twoway_bootstrap(a, b, outcome, np.arange(n), np.arange(n), 4, 400, rng)
    assert reps[:, 0].std() > 2 * singles[:, 0].std()  # the rater clustering shows


def test_bt_twoway_with_one_vote_per_rater_and_case_matches_the_vote_bootstrap():
    # Rows, columns and cells all coincide, so the two-way variance is the
    # one-way (vote-level) sandwich variance: the spread must match the
    # ordinary bootstrap over votes.
    rng = np.random.default_rng(8)
    n = 2000
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    theta = np.array([0.4, 0.0, -0.1, -0.3])
    outcome = np.where(rng.random(n) < 1 / (1 + np.exp(theta[b] - theta[a])), 0, 1)
    twoway = bt_twoway_bootstrap(a, b, outcome, np.arange(n), np.arange(n), 4, 2000, rng)
    cells, counts = collapse_votes(a, b, outcome)
    votes = bt_bootstrap(cells, counts, 4, 2000, rng)
    assert twoway.std(axis=0) == pytest.approx(votes.std(axis=0), rel=0.1)


@pytest.mark.parametrize("scale", [1.0, 0.5, 0.3, 1e7])
def test_pigeonhole_totals_equal_the_direct_weighted_sums(scale):
    # Counts (and halves) are summed in float32, exact for them; other values
    # (0.3) or totals beyond 2**23 go through float64: either way the result
    # is the direct sum_k U[row_k] V[col_k] stats[k] with the same draws.
    rng = np.random.default_rng(2)
    rows, cols = rng.integers(0, 7, 300), rng.integers(0, 11, 300)
    stats = rng.integers(0, 4, (300, 5)) * scale
    got = pigeonhole_totals(rows, cols, stats, 50, np.random.default_rng(9))
    U, V = pigeonhole_weights(7, 11, 50, np.random.default_rng(9))
    want = (U[:, rows] * V[:, cols]) @ stats
    assert np.allclose(got, want, rtol=1e-12, atol=0)


def test_share_variance_with_one_rater_per_answer_is_the_iid_variance():
    # Flags 1, 0, 0, 1 in one group, each answer its own case and rater:
    # share 0.5, z = +-0.125, sum z^2 = 0.0625; rows, columns and cells
    # coincide, so twoway = 4/3 * 0.0625 = 1/12 = var(flags, ddof=1) / 4.
    flags = np.array([1.0, 0.0, 0.0, 1.0])
    var = crossed_share_variance(flags, np.zeros(4, int), 1, np.arange(4), np.arange(4),
                                 np.arange(4))
    assert var.twoway == pytest.approx([1 / 12])


def test_share_variance_counts_a_rater_shared_by_answers():
    # Two groups of answers; in the first, one rater judged answers 0 and 1
    # (both flagged) and another answers 2 and 3 (neither): z = +-0.125 per
    # answer, rater totals +-0.25, squares 0.125; case totals and cells
    # square to 0.0625. twoway = 2 * 0.125 + 4/3 * 0.0625 - 4/3 * 0.0625
    # = 0.25, three times the iid 1/12: the rater explains the flags.
    flags = np.array([1.0, 1.0, 0.0, 0.0])
    var = crossed_share_variance(flags, np.zeros(4, int), 1, np.arange(4), np.arange(4),
                                 np.array([0, 0, 1, 1]))
    assert var.twoway == pytest.approx([0.25])
    assert var.cols == pytest.approx([1 / 12])


def test_share_variance_of_a_group_without_spread_is_zero():
    # Every answer flagged: share 1, every influence 0, so no cluster
    # carries any and every variance is 0 (an empty set of clusters must not
    # break the sums).
    var = crossed_share_variance(np.ones(4), np.zeros(4, int), 1, np.arange(4), np.arange(4),
                                 np.array([0, 0, 1, 1]))
    assert var.twoway == pytest.approx([0.0]) and var.clusters.tolist() == [0]


def test_influence_variance_is_the_same_from_dense_and_sparse_influences(monkeypatch):
    # Dense influences (bincounts over cluster x statistic bins) and sparse
    # ones (indicator products, used beyond the element budget) must agree,
    # clusters counted where z != 0.
    import clinieval.stats.crossed.variance as variance

    rng = np.random.default_rng(12)
    rows, cols = rng.integers(0, 6, 80), rng.integers(0, 15, 80)
    z = rng.normal(size=(80, 4)) * (rng.random((80, 4)) < 0.5)
    dense = influence_variance(rows, cols, z, z != 0)
    monkeypatch.setattr(variance, "_ELEMENT_BUDGET", 0)
    sparse = influence_variance(rows, cols, sp.csr_matrix(z), sp.csr_matrix(z != 0))
    for field in dense._fields:
        assert getattr(dense, field) == pytest.approx(getattr(sparse, field), rel=1e-12), field


def test_count_ratio_variance_equals_the_num_den_form():
    rng = np.random.default_rng(6)
    rows, cols = rng.integers(0, 9, 200), rng.integers(0, 25, 200)
    stats = rng.integers(0, 3, (200, 10)).astype(float)
    num_map = np.vstack([np.arange(-2, 3)[:, None] * [1, 0], np.arange(-2, 3)[:, None] * [0, 1]])
    den_map = np.vstack([np.ones((5, 1)) * [1, 0], np.ones((5, 1)) * [0, 1]])
    direct = crossed_ratio_variance(rows, cols, stats @ num_map, stats @ den_map)
    fused = count_ratio_variance(rows, cols, stats, num_map, den_map)
    for a, b in zip(direct, fused, strict=True):
        assert np.allclose(a, b, rtol=1e-10)


def test_pigeonhole_totals_in_cell_blocks_and_replicate_chunks(monkeypatch):
    # A budget of 64 weights with chunks of 8 replicates splits the 300 cells
    # into blocks of 8 and the 50 replicates into 7 chunks; the result is
    # still the direct sum with the same draws, made chunk by chunk.
    import clinieval.stats.crossed.pigeonhole as pigeonhole

    monkeypatch.setattr(pigeonhole, "_WEIGHT_BUDGET", 64)
    monkeypatch.setattr(pigeonhole, "_MIN_CHUNK", 8)
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(0, 7, 300), rng.integers(0, 11, 300)
    stats = rng.integers(0, 4, (300, 5)).astype(float)
    got = pigeonhole_totals(rows, cols, stats, 50, np.random.default_rng(9))
    draws = np.random.default_rng(9)
    chunks = [pigeonhole_weights(7, 11, min(8, 50 - s), draws) for s in range(0, 50, 8)]
    U, V = np.vstack([u for u, _ in chunks]), np.vstack([v for _, v in chunks])
    assert np.array_equal(got, (U[:, rows] * V[:, cols]) @ stats)


@pytest.mark.parametrize("budget", [2**25, 40])
def test_grouped_ratio_variance_equals_the_sparse_product_form(monkeypatch, budget):
    # Cells with counts over 4 groups x 5 values (columns sorted by group);
    # the run-and-bincount form (in blocks of groups when the budget is
    # small) gives the variances of count_ratio_variance's sparse products.
    import clinieval.stats.crossed.grouped as grouped

    monkeypatch.setattr(grouped, "_BIN_BUDGET", budget)
    rng = np.random.default_rng(5)
    rows, cols = np.repeat(np.arange(6), 9), np.tile(np.arange(9), 6)
    counts = rng.integers(0, 3, (54, 20)) * (rng.random((54, 20)) < 0.3)
    values = np.tile(np.arange(-2.0, 3.0), 4)
    groups = np.repeat(np.arange(4), 5)
    got = grouped.grouped_ratio_variance(rows, cols, counts, values, groups, 4)
    num_map = np.zeros((20, 4))
    num_map[np.arange(20), groups] = values
    den_map = (num_map != 0) | (np.arange(20)[:, None] // 5 == np.arange(4))
    want = count_ratio_variance(rows, cols, counts, num_map, den_map.astype(float))
    for field in want._fields:
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-10), field


def test_grouped_ratio_variance_with_one_entry_per_cell_and_group():
    # One rating per cell and group (as in the audit's cells: a rater rates
    # a criterion of an answer once): every run is one entry, and the form
    # without sums over runs gives count_ratio_variance's variances.
    rng = np.random.default_rng(11)
    rows, cols = np.repeat(np.arange(6), 10), np.tile(np.arange(10), 6)
    counts = np.zeros((60, 20))
    rated = rng.random((60, 4)) < 0.6
    cell, group = np.nonzero(rated)
    counts[cell, group * 5 + rng.integers(0, 5, cell.size)] = 1
    values = np.tile(np.arange(-2.0, 3.0), 4)
    groups = np.repeat(np.arange(4), 5)
    got = grouped_ratio_variance(rows, cols, counts, values, groups, 4)
    num_map = np.zeros((20, 4))
    num_map[np.arange(20), groups] = values
    den_map = np.zeros((20, 4))
    den_map[np.arange(20), groups] = 1.0
    want = count_ratio_variance(rows, cols, counts, num_map, den_map)
    for field in want._fields:
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-10), field


def test_grouped_ratio_variance_of_several_value_sets_is_each_one_alone():
    # A mean and a share over the same counts in one call: the fields hold
    # the first set's groups, then the second's, as two separate calls give.
    rng = np.random.default_rng(7)
    rows, cols = rng.integers(0, 5, 40), rng.integers(0, 8, 40)
    counts = rng.integers(0, 3, (40, 15)) * (rng.random((40, 15)) < 0.4)
    groups = np.repeat(np.arange(3), 5)
    values = np.vstack([np.tile(np.arange(-2.0, 3.0), 3), np.tile([1.0, 1, 0, 0, 0], 3)])
    both = grouped_ratio_variance(rows, cols, counts, values, groups, 3)
    alone = [grouped_ratio_variance(rows, cols, counts, v, groups, 3) for v in values]
    for field in both._fields:
        want = np.concatenate([getattr(a, field) for a in alone])
        assert getattr(both, field) == pytest.approx(want, rel=1e-12), field


@pytest.mark.parametrize("per_case", [3, 2])
def test_unit_variance_equals_the_share_variance_on_the_same_pieces(per_case):
    # 30 answers in cases of per_case answers, 2 groups, each judged by 3 of
    # 8 raters; values continuous (no influence exactly 0), some answers
    # without a value. With 2 per case no two answers of a group share a
    # case (the cells' squares are then the pieces' own).
    from clinieval.stats import crossed_unit_variance

    rng = np.random.default_rng(6)
    values = rng.normal(size=30)
    values[[4, 17]] = np.nan
    groups, cases = np.arange(30) % 2, np.arange(30) // per_case
    unit = np.repeat(np.arange(30), 3)
    rater = np.concatenate([rng.choice(8, 3, replace=False) for _ in range(30)])
    got = crossed_unit_variance(values, groups, 2, cases, unit, rater, rater * 100 + cases[unit])
    want = crossed_share_variance(values, groups, 2, cases, unit, rater)
    for field in want._fields:
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-10), field


@pytest.mark.parametrize(("low", "high"), [(0, 40), (0, 10_000), (0, 10**9), (-5, 35)])
def test_unique_codes_are_numpys(low, high):
    # Non-negative codes in a narrow range go through a table (0..10,000 over
    # 500 codes: for the values, not for the positions), wide or negative
    # ones are sorted; all must give np.unique's values and inverse.
    codes = np.random.default_rng(8).integers(low, high, 500)
    values, inverse = unique_codes(codes, return_inverse=True)
    want, want_inverse = np.unique(codes, return_inverse=True)
    assert np.array_equal(values, want) and np.array_equal(inverse, want_inverse)
    assert np.array_equal(unique_codes(codes), want)
    assert unique_codes(np.array([], dtype=int)).size == 0


@pytest.mark.parametrize("n_clusters, n_runs, shared", [(500, 200, False), (500, 200, True),
                                                        (5, 400, True)])
def test_run_squares_against_a_loop(n_clusters, n_runs, shared):
    # Sums over (cluster, group) bins of squared run totals and the number
    # of occupied clusters per group, by a plain loop: with many more bins
    # than runs (each bin one run, or some bins shared by runs) and with few
    # bins.
    from clinieval.stats.crossed.grouped import _run_squares

    rng = np.random.default_rng(n_clusters + shared)
    code = rng.integers(0, n_clusters, n_runs)
    group = rng.integers(0, 3, n_runs)
    keep = np.unique(code * 3 + group, return_index=True)[1]  # one run per bin
    code, group = code[keep], group[keep]
    if shared:  # a tenth of the runs go to bins that already have one
        code, group = np.r_[code, code[::10]], np.r_[group, group[::10]]
    z = rng.normal(size=code.size)
    totals = {}
    for c, g, v in zip(code, group, z, strict=True):
        totals[(c, g)] = totals.get((c, g), 0.0) + v
    want_sq, want_n = np.zeros(3), np.zeros(3, dtype=int)
    for (_, g), v in totals.items():
        want_sq[g] += v * v
        want_n[g] += 1
    squares, clusters = _run_squares(code, group, z, 3)
    np.testing.assert_allclose(squares, want_sq, rtol=1e-12)
    np.testing.assert_array_equal(clusters, want_n)


@pytest.mark.parametrize("size", [1, 30, 4000])
def test_pigeonhole_totals_in_16_bit_lanes_fall_back_when_a_total_wraps(monkeypatch, size):
    # With the lanes allowed for any totals, counts of 1 (no total near 2**16:
    # the bound alone shows it), 30 (some replicate totals may pass 2**16:
    # the grand-total check decides) and 4000 (they do: wrapped lanes, found
    # by the check and summed in float) all give the direct sums.
    import clinieval.stats.crossed.codes as codes
    import clinieval.stats.crossed.pigeonhole as pigeonhole

    monkeypatch.setattr(pigeonhole, "_LANE_TOTAL", 2**40)
    rng = np.random.default_rng(4)
    rows, cols = rng.integers(0, 7, 300), rng.integers(0, 11, 300)
    stats = rng.integers(0, 2, (300, 5)) * size + 0.5 * (size == 1)
    got = pigeonhole_totals(rows, cols, stats, 50, np.random.default_rng(9))
    U, V = pigeonhole_weights(7, 11, 50, np.random.default_rng(9))
    assert np.array_equal(got, (U[:, rows] * V[:, cols]) @ stats)
    lanes = pigeonhole._Lanes.fit(sp.csr_matrix(stats).T.tocsc(), *(codes._dense(x)[0] for x in
                                                                  (rows, cols)), 7, 11)
    U16, V16 = pigeonhole_weights(7, 11, 50, np.random.default_rng(9))
    found = lanes.totals(U16.T.astype(np.uint16), V16.T.astype(np.uint16))
    assert (found is None) == (size == 4000)


def test_grouped_ratio_variance_bincounts_few_bins_to_the_sparse_products_sums(monkeypatch):
    # Few (cluster, group) bins are bincounted; the sparse products used
    # beyond _DENSE_BINS add the same runs in the same order: equal bits.
    import clinieval.stats.crossed.grouped as grouped

    rng = np.random.default_rng(13)
    rows, cols = rng.integers(0, 9, 120), rng.integers(0, 30, 120)
    counts = rng.integers(0, 3, (120, 20)) * (rng.random((120, 20)) < 0.3)
    values = np.vstack([np.tile(np.arange(-2.0, 3.0), 4), np.tile([1.0, 1, 0, 0, 0], 4)])
    groups = np.repeat(np.arange(4), 5)
    dense = grouped.grouped_ratio_variance(rows, cols, counts, values, groups, 4)
    monkeypatch.setattr(grouped, "_DENSE_BINS", 0)
    sparse = grouped.grouped_ratio_variance(rows, cols, counts, values, groups, 4)
    for field in dense._fields:
        assert np.array_equal(getattr(dense, field), getattr(sparse, field)), field
