import numpy as np
import pytest
from scipy import stats as sps

from clinieval import stats


def test_hand_worked_r_and_p():
    # x = 1 2 3 4, y = 1 3 2 4: deviations (-1.5,-.5,.5,1.5) and (-1.5,.5,-.5,1.5)
    # sum of products = 2.25 - .25 - .25 + 2.25 = 4, sum of squares = 5 -> r = 0.8
    # (the data are their own ranks, so rho = 0.8 too). With n = 4 the t test
    # on 2 df reduces to p = 1 - |r| = 0.2.
    for fn in (stats.pearson, stats.spearman):
        r, p, n = fn([1, 2, 3, 4], [1, 3, 2, 4])
        assert (r, p, n) == pytest.approx((0.8, 0.2, 4), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=13)
    y = x + rng.normal(size=13)
    assert stats.pearson(x, y)[:2] == pytest.approx(tuple(sps.pearsonr(x, y)), abs=1e-12)
    assert stats.spearman(x, y)[:2] == pytest.approx(tuple(sps.spearmanr(x, y)), abs=1e-12)


def test_missing_pairs_dropped_and_degenerate_inputs():
    r, _, n = stats.pearson([1, 2, np.nan, 4, 5], [2, 4, 6, np.inf, 9])
    assert n == 3 and r == pytest.approx(sps.pearsonr([1, 2, 5], [2, 4, 9]).statistic)
    r, p, n = stats.spearman([1, 1, 1, 1], [1, 2, 3, 4])
    assert np.isnan(r) and np.isnan(p) and n == 4
    assert np.isnan(stats.pearson([1, 2], [3, 4]).r)
    with pytest.raises(ValueError):
        stats.pearson([1, 2, 3], [1, 2])


def test_bootstrap_rank_correlation_hand_worked():
    x = [[1, 2, 3], [3, 2, 1], [1, 1, 1], [1, 2, 2]]
    y = [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]]
    # identical order -> 1; reversed -> -1; constant -> nan;
    # ranks (1, 2.5, 2.5) vs (1, 2, 3): centred (-1, .5, .5)·(-1, 0, 1) = 1.5,
    # norms sqrt(1.5) * sqrt(2) -> rho = 1.5 / sqrt(3) = 0.8660254
    got = stats.bootstrap_rank_correlation(x, y)
    np.testing.assert_allclose(got[[0, 1, 3]], [1.0, -1.0, np.sqrt(3) / 2], atol=1e-15)
    assert np.isnan(got[2])


def test_bootstrap_rank_correlation_matches_scipy_rowwise():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(200, 9))
    y = np.round(x + rng.normal(size=(200, 9)), 1)  # ties
    expected = [sps.spearmanr(row_x, row_y).statistic for row_x, row_y in zip(x, y, strict=True)]
    np.testing.assert_allclose(stats.bootstrap_rank_correlation(x, y), expected, atol=1e-12)
