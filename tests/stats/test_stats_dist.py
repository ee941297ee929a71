"""The special-function distributions and ranks against scipy.stats."""

import numpy as np
import pytest
import scipy.stats as sps

from clinieval.stats import binomial_p_value, pearson, spearman
from clinieval.stats._dist import norm_ppf, norm_sf, rankdata, t_ppf, t_two_sided_p


def test_normal_and_t_functions_equal_scipy():
    q = np.array([0.001, 0.025, 0.5, 0.8, 0.975])
    assert norm_ppf(q) == pytest.approx(sps.norm.ppf(q), rel=1e-12)
    x = np.array([-3.0, 0.0, 1.3, 8.0])
    assert norm_sf(x) == pytest.approx(sps.norm.sf(x), rel=1e-12)
    df = np.array([1.0, 2.0, 7.0, 300.0])
    assert t_ppf(0.975, df) == pytest.approx(sps.t.ppf(0.975, df), rel=1e-10)
    assert t_two_sided_p(2.1, df) == pytest.approx(2 * sps.t.sf(2.1, df), rel=1e-10)


@pytest.mark.parametrize("method", ["average", "min"])
def test_ranks_equal_scipy_with_ties_and_nan(method):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(50, 7)).astype(float)
    assert rankdata(x, method, axis=1) == pytest.approx(sps.rankdata(x, method, axis=1))
    assert rankdata(x.T, method, axis=0) == pytest.approx(sps.rankdata(x.T, method, axis=0))
    long = rng.integers(0, 50, size=5_000).astype(float)  # one long slice, many ties
    assert rankdata(long, method) == pytest.approx(sps.rankdata(long, method))
    x[3, 2] = np.nan
    ours, ref = rankdata(x, method, axis=1), sps.rankdata(x, method, axis=1)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    assert ours[np.isfinite(ours)] == pytest.approx(ref[np.isfinite(ref)])


@pytest.mark.parametrize(("k", "n", "p"), [(0, 10, 0.5), (3, 10, 0.5), (5, 10, 0.5),
                                           (60, 100, 0.5), (7, 40, 0.3), (31, 40, 0.3),
                                           (12, 12, 0.5), (4_950, 10_000, 0.5)])
def test_binomial_p_value_equals_scipy_binomtest(k, n, p):
    assert binomial_p_value(k, n, p) == pytest.approx(sps.binomtest(k, n, p).pvalue, rel=1e-9)


def test_correlations_equal_scipy():
    rng = np.random.default_rng(1)
    x = rng.normal(size=12)
    y = x + rng.normal(size=12)
    y[:3] = y[3]  # ties for Spearman
    for ours, ref in ((pearson(x, y), sps.pearsonr(x, y)), (spearman(x, y), sps.spearmanr(x, y))):
        assert ours.r == pytest.approx(ref.statistic, rel=1e-12)
        assert ours.p == pytest.approx(ref.pvalue, rel=1e-9)
