"""Estimators against numbers stored in tests/data/stats_*.json.

The expected values were produced once by tests/data/make_stats_refs.py with
choix, statsmodels, krippendorff and scipy.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from clinieval import stats

DATA = Path(__file__).parent.parent / "data"


def _cases(name):
    return json.loads((DATA / name).read_text())["cases"]


@pytest.mark.parametrize("case", _cases("stats_choix.json"))
def test_bt_fit_matches_choix(case):
    table = stats.outcome_table(case["a"], case["b"], case["outcome"], case["n_models"])
    got = stats.bt_fit(table, alpha=case["alpha"])
    np.testing.assert_allclose(got, case["expected"], atol=1e-6)


@pytest.mark.parametrize("case", _cases("stats_statsmodels_glm.json"))
def test_logistic_irls_matches_statsmodels(case):
    fit = stats.logistic_irls(case["X"], case["y"], case["weights"])
    np.testing.assert_allclose(fit.coef, case["coef"], atol=1e-8)
    np.testing.assert_allclose(fit.se, case["se"], atol=1e-8)


@pytest.mark.parametrize("case", _cases("stats_wilson.json"))
def test_wilson_matches_statsmodels(case):
    lower, upper = stats.wilson_ci(case["k"], case["n"], level=case["level"])
    np.testing.assert_allclose(lower, case["lower"], atol=1e-12)
    np.testing.assert_allclose(upper, case["upper"], atol=1e-12)


@pytest.mark.parametrize("case", _cases("stats_fleiss.json"))
def test_fleiss_matches_statsmodels(case):
    assert stats.fleiss_kappa(case["counts"]) == pytest.approx(case["kappa"], abs=1e-12)


@pytest.mark.parametrize("case", _cases("stats_krippendorff.json"))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_matches_package(case, level):
    data = np.array(case["reliability_data"], dtype=float)  # None -> nan
    values = np.array(case["values"], dtype=float)
    counts = np.stack([(data == v).sum(axis=0) for v in values], axis=1)
    got = stats.krippendorff_alpha(counts, level, values=values)
    assert got == pytest.approx(case["alpha"][level], abs=1e-9)


@pytest.mark.parametrize("case", _cases("stats_correlation.json"))
def test_correlations_match_scipy(case):
    for name in ("pearson", "spearman"):
        r, p, n = getattr(stats, name)(case["x"], case["y"])
        assert (r, p) == pytest.approx(tuple(case[name]), abs=1e-12)
        assert n == len(case["x"])
