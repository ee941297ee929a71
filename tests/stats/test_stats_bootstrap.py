import numpy as np
import pytest

from clinieval import stats
from clinieval.stats import bootstrap as bootstrap_module

SCORES = np.arange(-2, 3)


def test_percentile_ci_hand_worked():
    # 0..100: with linear interpolation the 2.5% and 97.5% quantiles sit at
    # positions 100 * 0.025 = 2.5 and 97.5, i.e. the values 2.5 and 97.5.
    lower, upper = stats.percentile_ci(np.arange(101.0))
    assert (lower, upper) == pytest.approx((2.5, 97.5), abs=1e-12)
    lower, upper = stats.percentile_ci(np.arange(101.0).reshape(-1, 1) * [1, 2], level=0.9)
    np.testing.assert_allclose(lower, [5.0, 10.0])
    np.testing.assert_allclose(upper, [95.0, 190.0])


def test_mean_bootstrap_sd_matches_analytic_se():
    counts = np.array([[5, 10, 30, 40, 15], [30, 5, 5, 5, 55]])
    reps = stats.bootstrap_mean_counts(counts, SCORES, 20000, np.random.default_rng(0))
    assert reps.shape == (20000, 2)
    for row, rep in zip(counts, reps.T, strict=True):
        ratings = np.repeat(SCORES, row)
        # bootstrap SE of a mean = population SD (ddof=0) / sqrt(n)
        assert rep.std() == pytest.approx(ratings.std() / np.sqrt(ratings.size), rel=0.05)
        assert rep.mean() == pytest.approx(ratings.mean(), abs=0.01)


def test_mean_bootstrap_equals_resampling_ratings_in_distribution():
    row = np.array([3, 0, 7, 12, 2])
    ratings = np.repeat(SCORES, row)
    rng = np.random.default_rng(1)
    brute = rng.choice(ratings, size=(8000, ratings.size)).mean(axis=1)
    ours = stats.bootstrap_mean_counts(row, SCORES, 8000, rng)
    assert ours.shape == (8000,)
    np.testing.assert_allclose(
        np.quantile(ours, [0.05, 0.5, 0.95]), np.quantile(brute, [0.05, 0.5, 0.95]), atol=0.05
    )


def test_mean_bootstrap_reproducible_seed_sensitive_and_degenerate():
    counts = np.array([[1, 2, 3, 4, 5], [0, 0, 9, 0, 0], [0, 0, 0, 0, 0]])
    first = stats.bootstrap_mean_counts(counts, SCORES, 100, np.random.default_rng(5))
    again = stats.bootstrap_mean_counts(counts, SCORES, 100, np.random.default_rng(5))
    other = stats.bootstrap_mean_counts(counts, SCORES, 100, np.random.default_rng(6))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first[:, 0], other[:, 0])
    np.testing.assert_array_equal(first[:, 1], 0.0)  # every rating is 0
    assert np.isnan(first[:, 2]).all()  # no ratings


def test_mean_bootstrap_chunking_does_not_change_result(monkeypatch):
    counts = np.random.default_rng(2).integers(0, 20, size=(4, 3, 5))
    whole = stats.bootstrap_mean_counts(counts, SCORES, 64, np.random.default_rng(3))
    monkeypatch.setattr(bootstrap_module, "_ELEMENT_BUDGET", 100)
    chunked = stats.bootstrap_mean_counts(counts, SCORES, 64, np.random.default_rng(3))
    assert whole.shape == (64, 4, 3)
    np.testing.assert_array_equal(whole, chunked)


def test_proportion_bootstrap():
    reps = stats.bootstrap_proportion_counts(
        [30, 0, 5], [100, 0, 5], 20000, np.random.default_rng(0)
    )
    assert reps.shape == (20000, 3)
    # binomial SE sqrt(0.3 * 0.7 / 100) = 0.045826
    assert reps[:, 0].std() == pytest.approx(0.045826, rel=0.05)
    assert np.isnan(reps[:, 1]).all()
    np.testing.assert_array_equal(reps[:, 2], 1.0)


@pytest.mark.parametrize("freq", [[5, 1, 30, 2], [1, 1, 2, 1, 1, 1, 1],
                                  [40, 3, 1, 0, 2, 1, 25, 1]])
def test_resample_counts_moments(freq):
    # Whichever way the units are drawn (a binomial each for frequent ones,
    # index draws for a pool of rare ones: 30 alone and the rest pooled in
    # the first case, all pooled in the second, 40 alone in the third), the
    # counts must have the multinomial's moments: mean n p, variance
    # n p (1 - p), covariance -n p_i p_j; a unit that never occurs is never drawn.
    freq = np.array(freq)
    n = freq.sum()
    draws = stats.resample_counts(freq, 40000, np.random.default_rng(4))
    assert (draws.sum(axis=1) == n).all()
    p = freq / n
    np.testing.assert_allclose(draws.mean(axis=0), n * p, rtol=0.05)
    cov = np.cov(draws, rowvar=False)
    want = n * (np.diag(p) - np.outer(p, p))
    np.testing.assert_allclose(np.diag(cov), np.diag(want), rtol=0.05)
    np.testing.assert_allclose(cov, want, atol=0.05 * np.abs(want).max())


def test_shared_resample_counts_moments_and_coupling():
    # One resample of 12 items shared by two groupings of them: each
    # grouping's counts must be the multinomial over its units' shares (as
    # resample_counts would draw them), and the two groupings must see the
    # same items: the joint count of (unit a of grouping 0, unit b of
    # grouping 1) is the multinomial count of the items in both, so the
    # cross-covariance is n (q_ab - p_a p_b) with q_ab their share.
    codes = np.array([[0, 0], [0, 1], [1, 1], [1, 1], [2, 0], [2, 2],
                      [2, 2], [0, 2], [1, 0], [2, 1], [2, 1], [0, 0]])
    n = len(codes)
    first, second = stats.resample_shared_counts(codes, [3, 3], 40000,
                                                 np.random.default_rng(5))
    assert first.shape == second.shape == (40000, 3)
    assert (first.sum(axis=1) == n).all() and (second.sum(axis=1) == n).all()
    for draws, column in ((first, codes[:, 0]), (second, codes[:, 1])):
        p = np.bincount(column, minlength=3) / n
        np.testing.assert_allclose(draws.mean(axis=0), n * p, rtol=0.05)
        want = n * (np.diag(p) - np.outer(p, p))
        np.testing.assert_allclose(np.cov(draws, rowvar=False), want, atol=0.05 * want.max())
    p0, p1 = np.bincount(codes[:, 0]) / n, np.bincount(codes[:, 1]) / n
    q = np.zeros((3, 3))
    np.add.at(q, (codes[:, 0], codes[:, 1]), 1.0 / n)
    cross = np.cov(first, second, rowvar=False)[:3, 3:]
    np.testing.assert_allclose(cross, n * (q - np.outer(p0, p1)), atol=0.05 * want.max())


def test_shared_resample_chosen_by_cost():
    # Nine groupings of 11,900 items into 60 frequent and 340 rare patterns
    # (as in the reliability section at paper scale): one shared draw per
    # item (11,900 x 1.9) beats nine separate multinomials (60 binomials and
    # 1,700 pooled draws each, 9 x 3,500); a single grouping, or groupings
    # with a handful of patterns, are cheaper alone.
    many = [np.r_[np.full(60, 170), np.full(340, 5)]] * 9
    assert stats.shared_resample_cheaper(many)
    assert not stats.shared_resample_cheaper(many[:1])
    assert not stats.shared_resample_cheaper([np.array([6000, 6000])] * 9)


def ratio_se(sums, ns):
    # Bootstrap (ddof=0) delta-method SE of sum(s) / sum(n) over clusters.
    ratio = sums.sum() / ns.sum()
    return np.sqrt(np.sum((sums - ratio * ns) ** 2)) / ns.sum()


def test_cluster_ratio_sd_matches_delta_method():
    rng = np.random.default_rng(7)
    ns = rng.integers(1, 6, 2000).astype(float)
    sums = rng.normal(0.3, 1.0, 2000) * ns + rng.normal(0.0, 2.0, 2000)
    reps = stats.cluster_bootstrap_ratio(sums, ns, 5000, np.random.default_rng(8))
    assert reps.shape == (5000,)
    assert reps.std() == pytest.approx(ratio_se(sums, ns), rel=0.05)
    assert reps.mean() == pytest.approx(sums.sum() / ns.sum(), abs=0.01)


def test_cluster_ratio_rows_reproducible_and_order_free():
    rng = np.random.default_rng(9)
    ns = rng.integers(0, 3, size=(500, 3))
    sums = rng.integers(-2, 3, size=(500, 3)) * ns
    reps = stats.cluster_bootstrap_ratio(sums, ns, 200, np.random.default_rng(1))
    assert reps.shape == (200, 3)
    order = rng.permutation(500)
    shuffled = stats.cluster_bootstrap_ratio(sums[order], ns[order], 200, np.random.default_rng(1))
    np.testing.assert_array_equal(reps, shuffled)  # identical clusters merged, sorted
    other = stats.cluster_bootstrap_ratio(sums, ns, 200, np.random.default_rng(2))
    assert not np.array_equal(reps, other)


def test_cluster_ratio_chunking_does_not_change_result(monkeypatch):
    rng = np.random.default_rng(10)
    sums, ns = rng.normal(size=300), np.ones(300)
    whole = stats.cluster_bootstrap_ratio(sums, ns, 50, np.random.default_rng(3))
    monkeypatch.setattr(bootstrap_module, "_ELEMENT_BUDGET", 1000)
    chunked = stats.cluster_bootstrap_ratio(sums, ns, 50, np.random.default_rng(3))
    np.testing.assert_allclose(whole, chunked, rtol=1e-12)  # same draws, summed in blocks


def test_cluster_ratio_many_clusters_few_patterns_is_fast():
    # 1.25 M answers with 1-3 ratings each collapse to a few dozen patterns.
    rng = np.random.default_rng(11)
    ns = rng.integers(1, 4, 1_250_000)
    sums = rng.binomial(4 * ns, 0.6) - 2 * ns
    reps = stats.cluster_bootstrap_ratio(sums, ns, 1000, np.random.default_rng(0))
    assert reps.std() == pytest.approx(ratio_se(sums, ns.astype(float)), rel=0.08)


def test_cluster_ratio_edge_cases():
    np.testing.assert_array_equal(
        stats.cluster_bootstrap_ratio([2.0, 2.0], [1.0, 1.0], 5, np.random.default_rng(0)), 2.0
    )
    assert np.isnan(stats.cluster_bootstrap_ratio([0.0], [0.0], 3, np.random.default_rng(0))).all()
    assert stats.cluster_bootstrap_ratio(
        np.zeros((0, 2)), np.zeros((0, 2)), 3, np.random.default_rng(0)
    ).shape == (3, 2)



@pytest.mark.parametrize("shape, high", [((2000, 5), 4), ((60, 3), 3), ((500, 2), 30)])
def test_merge_identical_rows_by_table_equals_the_sorted_merge(monkeypatch, shape, high):
    # Rows of small counts are merged in a table over their codes' range;
    # the sorting path (taken for wide ranges) gives the same patterns in the
    # same order, frequencies and inverse.
    import clinieval.stats.bootstrap as bootstrap

    rows = np.random.default_rng(1).integers(0, high, shape)
    table = stats.merge_identical_rows(rows, return_inverse=True)
    monkeypatch.setattr(bootstrap, "_PATTERN_SLOTS", 0)
    sorted_ = stats.merge_identical_rows(rows, return_inverse=True)
    for a, b in zip(table, sorted_, strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    assert np.array_equal(table[0][table[2]], rows)


@pytest.mark.parametrize("budget, per_pass, short", [(2**18, 4, 2**16), (24, 3, 2**16),
                                                     (24, 1, 0), (5, 2, 2**16)])
def test_shared_resample_counts_are_the_counts_of_the_index_draws(monkeypatch, budget,
                                                                   per_pass, short):
    # Whatever the chunks of draws, the passes of the product and its dtype
    # (16-bit or float32), replicate b counts the items of the b-th run of n
    # uniform index draws of the stream, as the definition says.
    monkeypatch.setattr(bootstrap_module, "_DRAW_BUDGET", budget)
    monkeypatch.setattr(bootstrap_module, "_SHARED_PASS", per_pass)
    monkeypatch.setattr(bootstrap_module, "_SHORT_COUNTS", short)
    codes = np.random.default_rng(3).integers(0, 4, (12, 2))
    got = stats.resample_shared_counts(codes, [4, 4], 23, np.random.default_rng(8))
    picks = np.random.default_rng(8).integers(0, 12, (23, 12))
    for j, counts in enumerate(got):
        want = np.stack([np.bincount(codes[row, j], minlength=4) for row in picks])
        assert np.array_equal(counts, want)


def test_unit_counts_in_narrow_integers_equal_the_wide_draw():
    # the same rng stream in 8-bit counts as in 64-bit ones, laid out either way
    wide = bootstrap_module.unit_counts(700, 40, np.random.default_rng(3))
    narrow = bootstrap_module.unit_counts(700, 40, np.random.default_rng(3), np.uint8,
                                          by_unit=True)
    assert narrow.dtype == np.uint8
    np.testing.assert_array_equal(narrow.T, wide)
    assert (wide.sum(axis=1) == 700).all()


@pytest.mark.parametrize("stage", [700, 700 * 7, 2**25])
def test_unit_counts_by_unit_staged_in_blocks_equal_the_draw(stage, monkeypatch):
    # by unit, replicates are staged and written a block of columns at a time:
    # stages of one draw (three replicates), of seven (the last one short) and
    # of all replicates give the draws laid out by replicate
    monkeypatch.setattr(bootstrap_module, "_STAGE_BYTES", stage)
    monkeypatch.setattr(bootstrap_module, "_DRAW_BUDGET", 700 * 3)  # three replicates a draw
    wide = bootstrap_module.unit_counts(700, 40, np.random.default_rng(4))
    narrow = bootstrap_module.unit_counts(700, 40, np.random.default_rng(4), np.uint8,
                                          by_unit=True)
    np.testing.assert_array_equal(narrow.T, wide)


class _Always:
    """A generator whose index draws all name unit 0: every count of a
    replicate falls on one unit (n of n)."""

    def integers(self, low, high, size):
        return np.zeros(size, dtype=np.int64)


@pytest.mark.parametrize("n, widened", [(300, np.uint16), (70_000, np.int64)])
def test_unit_counts_widen_a_narrow_dtype_instead_of_wrapping(n, widened):
    counts = bootstrap_module.unit_counts(n, 3, _Always(), np.uint8, by_unit=True)
    assert counts.dtype == widened
    assert (counts[0] == n).all() and (counts[1:] == 0).all()


def test_unit_counts_keep_a_narrow_dtype_the_counts_fit():
    counts = bootstrap_module.unit_counts(255, 3, _Always(), np.uint8)
    assert counts.dtype == np.uint8 and (counts[:, 0] == 255).all()
