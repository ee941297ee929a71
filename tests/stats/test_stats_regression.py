import numpy as np
import pytest
import statsmodels.api as sm

from clinieval import stats
from clinieval.stats import ConvergenceError


def test_intercept_only_hand_worked():
    # 3 successes in 10: coef = log(3/7) = -0.8472979,
    # SE = 1 / sqrt(n p (1 - p)) = 1 / sqrt(10 * 0.3 * 0.7) = 1 / sqrt(2.1) = 0.6900656
    y = np.array([1.0] * 3 + [0.0] * 7)
    fit = stats.logistic_irls(np.ones((10, 1)), y)
    assert fit.converged
    assert fit.coef[0] == pytest.approx(np.log(3 / 7), abs=1e-12)
    assert fit.se[0] == pytest.approx(1 / np.sqrt(2.1), abs=1e-12)


def test_frequency_weights_equal_repeated_rows():
    # the same data as two rows with weights 3 and 7
    fit = stats.logistic_irls(np.ones((2, 1)), [1.0, 0.0], weights=[3.0, 7.0])
    assert fit.coef[0] == pytest.approx(np.log(3 / 7), abs=1e-12)
    assert fit.se[0] == pytest.approx(1 / np.sqrt(2.1), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_matches_statsmodels(seed):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(400), rng.normal(size=(400, 3))])
    y = (rng.random(400) < 1 / (1 + np.exp(-(X @ [0.2, 1.0, -0.5, 0.0])))).astype(float)
    y[rng.random(400) < 0.1] = 0.5
    ref = sm.GLM(y, X, family=sm.families.Binomial()).fit(tol=1e-12)
    fit = stats.logistic_irls(X, y)
    np.testing.assert_allclose(fit.coef, ref.params, atol=1e-8)
    np.testing.assert_allclose(fit.se, ref.bse, atol=1e-8)
    np.testing.assert_allclose(fit.cov, ref.cov_params(), atol=1e-8)


def test_separation_raises_or_reports():
    X = np.column_stack([np.ones(6), [-3.0, -2.0, -1.0, 1.0, 2.0, 3.0]])
    y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    with pytest.raises(ConvergenceError):
        stats.logistic_irls(X, y, max_iter=50)
    assert not stats.logistic_irls(X, y, max_iter=50, strict=False).converged


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.logistic_irls(np.ones((3, 1)), [0.0, 1.5, 1.0])
    with pytest.raises(ValueError):
        stats.logistic_irls(np.ones((3, 1)), [0.0, 1.0])
