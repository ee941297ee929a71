import numpy as np
import pytest
import scipy.stats as sps

from clinieval import stats


def test_normal_ci_equals_scipy_interval():
    lo, hi = stats.normal_ci([0.3, -1.0], [0.1, 0.5], 0.9)
    expected = sps.norm.interval(0.9, loc=[0.3, -1.0], scale=[0.1, 0.5])
    np.testing.assert_allclose([lo, hi], expected, atol=1e-14)
    assert stats.normal_quantile(0.95) == pytest.approx(1.959963984540054, abs=1e-12)


def test_normal_p_value_hand_worked():
    # z = 1.959964 is the 97.5% quantile, so the two-sided p is 0.05
    assert stats.normal_p_value(-1.959963984540054) == pytest.approx(0.05, abs=1e-12)


def test_group_mean_ci_equals_scipy_per_group():
    rng = np.random.default_rng(1)
    groups = rng.integers(0, 4, 200)
    groups[groups == 3] = 2  # group 3 left empty
    values = rng.normal(size=200)
    k, mean, lo, hi = stats.group_mean_ci(groups, values, 5, 0.95)
    for g in range(3):
        v = values[groups == g]
        assert k[g] == v.size and mean[g] == pytest.approx(v.mean(), abs=1e-12)
        expected = sps.norm.interval(0.95, loc=v.mean(), scale=sps.sem(v))
        np.testing.assert_allclose([lo[g], hi[g]], expected, atol=1e-12)
    assert k[3] == 0 and np.isnan(mean[3]) and np.isnan(lo[3])


def test_group_mean_ci_with_one_value_has_no_interval():
    k, mean, lo, hi = stats.group_mean_ci([0], [2.5], 1)
    assert (k[0], mean[0]) == (1, 2.5) and np.isnan(lo[0]) and np.isnan(hi[0])


def test_binomial_p_value_hand_worked():
    # 8 of 10 against 1/2: P(X >= 8) = (45 + 10 + 1) / 1024 = 56/1024; two-sided 112/1024
    assert stats.binomial_p_value(8, 10) == pytest.approx(112 / 1024, abs=1e-15)
    assert np.isnan(stats.binomial_p_value(0, 0))
