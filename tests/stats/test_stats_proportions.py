import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from clinieval import stats


def test_wilson_hand_worked_3_of_10():
    # z = 1.959964, z^2 = 3.841459, p = 0.3, n = 10
    # denom  = 1 + 3.841459/10             = 1.3841459
    # centre = (0.3 + 3.841459/20) / denom = 0.4920729 / 1.3841459 = 0.3555066
    # half   = z * sqrt(0.3*0.7/10 + 3.841459/400) / denom
    #        = 1.959964 * sqrt(0.0306036) / 1.3841459 = 0.2477153
    # -> (0.1077913, 0.6032219)
    lower, upper = stats.wilson_ci(3, 10)
    assert float(lower) == pytest.approx(0.1077913, abs=1e-7)
    assert float(upper) == pytest.approx(0.6032219, abs=1e-7)


def test_wilson_matches_statsmodels_vectorised():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 500, size=(6, 7))
    k = rng.integers(0, n + 1)
    for level in (0.95, 0.8):
        lower, upper = stats.wilson_ci(k, n, level=level)
        ref_lower, ref_upper = proportion_confint(k, n, alpha=1 - level, method="wilson")
        np.testing.assert_allclose(lower, ref_lower, atol=1e-14)
        np.testing.assert_allclose(upper, ref_upper, atol=1e-14)


def test_wilson_edges():
    lower, upper = stats.wilson_ci([0, 10, 0], [10, 10, 0])
    assert lower[0] == 0.0 and upper[1] == 1.0
    assert np.isnan(lower[2]) and np.isnan(upper[2])
    with pytest.raises(ValueError):
        stats.wilson_ci(5, 4)
