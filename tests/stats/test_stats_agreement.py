import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from clinieval import stats

SCORES = np.arange(-2, 3)


def test_category_counts():
    counts = stats.category_counts([0, 0, 1, 2, 2, 2], [1, 1, 0, 2, 0, 2], 4, 3)
    np.testing.assert_array_equal(counts, [[0, 2, 0], [1, 0, 0], [1, 0, 2], [0, 0, 0]])


def test_fleiss_hand_worked():
    # item 1: [3,0,0]  P1 = (9 - 3) / (3*2) = 1
    # item 2: [1,2,0]  P2 = (1 + 4 - 3) / 6 = 1/3
    # item 3: [0,1,2]  P3 = (1 + 4 - 3) / 6 = 1/3
    # P_bar = 5/9; category shares 4/9, 3/9, 2/9 -> P_e = (16 + 9 + 4) / 81 = 29/81
    # kappa = (45/81 - 29/81) / (52/81) = 16/52 = 4/13
    counts = [[3, 0, 0], [1, 2, 0], [0, 1, 2]]
    assert stats.fleiss_kappa(counts) == pytest.approx(4 / 13, abs=1e-15)


def test_fleiss_varying_raters_hand_worked():
    # item 1: [2,0] P1 = (4 - 2) / 2 = 1; item 2: [1,2] P2 = (1 + 4 - 3) / 6 = 1/3
    # item 3: [1,0] has one rating and is left out.
    # P_bar = 2/3; shares over kept ratings 3/5, 2/5 -> P_e = 13/25
    # kappa = (2/3 - 13/25) / (12/25) = (50 - 39) / 36 = 11/36
    assert stats.fleiss_kappa([[2, 0], [1, 2], [1, 0]]) == pytest.approx(11 / 36, abs=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_fleiss_matches_statsmodels_with_equal_raters(seed):
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(rng.integers(2, 9), rng.dirichlet(np.ones(5)), size=50)
    assert stats.fleiss_kappa(counts) == pytest.approx(sm_fleiss_kappa(counts), abs=1e-12)


def test_fleiss_degenerate():
    assert np.isnan(stats.fleiss_kappa([[1, 0], [0, 1]]))  # no item with 2 ratings
    assert np.isnan(stats.fleiss_kappa([[3, 0], [2, 0]]))  # one category only: P_e = 1


def test_krippendorff_nominal_hand_worked():
    # unit 1: a a   unit 2: a b   unit 3: b b b
    # coincidences: o_aa = (2*2 - 2)/1 = 2; unit 2 adds o_ab = o_ba = 1;
    # o_bb = (3*3 - 3)/2 = 3.  n_a = 3, n_b = 4, n = 7.
    # D_o = (1 + 1)/7; D_e = (3*4 + 4*3) / (7*6) = 24/42 = 4/7
    # alpha = 1 - (2/7)/(4/7) = 0.5
    counts = [[2, 0], [1, 1], [0, 3]]
    assert stats.krippendorff_alpha(counts, "nominal") == pytest.approx(0.5, abs=1e-15)
    # With two values every metric is a constant times the nominal one:
    # ordinal d2_ab = (3 + 4 - 7/2)**2, interval d2_ab = 1, so alpha is still 0.5.
    assert stats.krippendorff_alpha(counts, "ordinal") == pytest.approx(0.5, abs=1e-15)
    assert stats.krippendorff_alpha(counts, "interval") == pytest.approx(0.5, abs=1e-15)


def reliability_to_counts(data, values):
    return np.stack([(data == v).sum(axis=0) for v in values], axis=1)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_matches_package(seed, level):
    rng = np.random.default_rng(seed)
    shares = rng.dirichlet(np.ones(5) * 2)
    item_mean = rng.normal(0.0, 1.0, 60)
    data = np.clip(np.round(item_mean + rng.normal(0.0, 0.8, (7, 60))), -2, 2)
    data[rng.random(data.shape) < shares[0]] = np.nan  # ragged missingness
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    counts = reliability_to_counts(data, SCORES)
    got = stats.krippendorff_alpha(counts, level, values=SCORES)
    assert got == pytest.approx(expected, abs=1e-9)


def test_krippendorff_unused_value_column_changes_nothing():
    rng = np.random.default_rng(5)
    data = rng.choice([-2.0, -1.0, 0.0, 1.0], size=(4, 30))  # no rater uses +2
    data[rng.random(data.shape) < 0.3] = np.nan
    counts = reliability_to_counts(data, SCORES)
    for level in ("ordinal", "interval", "nominal"):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        got = stats.krippendorff_alpha(counts, level, values=SCORES)
        assert got == pytest.approx(expected, abs=1e-9)


def test_krippendorff_rejects_unknown_level():
    with pytest.raises(ValueError):
        stats.krippendorff_alpha([[1, 1]], "ratio")


@pytest.mark.parametrize("ddof", [0, 1])
def test_within_item_std_matches_numpy(ddof):
    rng = np.random.default_rng(6)
    counts = rng.integers(0, 4, size=(40, 5))
    counts[0] = [0, 0, 1, 0, 0]  # one rating: left out
    got = stats.within_item_std(counts, SCORES, ddof=ddof)
    assert np.isnan(got[0])
    for row, value in zip(counts[1:], got[1:], strict=True):
        ratings = np.repeat(SCORES, row)
        expected = ratings.std(ddof=ddof) if ratings.size >= 2 else np.nan
        np.testing.assert_allclose(value, expected, atol=1e-12)
    assert stats.mean_within_item_std(counts, SCORES, ddof=ddof) == pytest.approx(
        np.nanmean(got), abs=1e-15
    )


def test_within_item_std_hand_worked():
    # scores 0 and 2: mean 1, squared deviations 1 + 1 = 2 -> sd sqrt(2/1) (ddof=1)
    # scores -1, -1, -1: sd 0.  Mean over items: sqrt(2)/2.
    counts = [[0, 0, 1, 0, 1], [0, 3, 0, 0, 0], [0, 0, 0, 0, 0]]
    assert stats.mean_within_item_std(counts, SCORES) == pytest.approx(np.sqrt(2) / 2)
    assert np.isnan(stats.mean_within_item_std([[0, 1]], [0, 1]))


def _expand(items, freq):
    """The item table with each item repeated ``freq`` times."""
    return np.repeat(np.asarray(items), np.asarray(freq), axis=0)


@pytest.mark.parametrize("seed", range(3))
def test_weighted_kappa_equals_statsmodels_on_the_repeated_items(seed):
    """Integer weights are item multiplicities: the weighted statistic must equal
    statsmodels' Fleiss kappa on the table with every item repeated that often."""
    rng = np.random.default_rng(seed)
    items = rng.multinomial(3, rng.dirichlet(np.ones(5)), size=30)
    weights = rng.integers(0, 4, size=(4, 30))
    got = stats.fleiss_kappa_weighted(items, weights)
    expected = [sm_fleiss_kappa(_expand(items, w)) for w in weights]
    np.testing.assert_allclose(got, expected, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_weighted_alpha_equals_krippendorff_on_the_repeated_units(seed):
    rng = np.random.default_rng(seed)
    items = rng.multinomial(rng.integers(2, 5), rng.dirichlet(np.ones(5)), size=25)
    weights = rng.integers(0, 3, size=(3, 25))
    got = stats.krippendorff_alpha_weighted(items, weights, level="ordinal")
    expected = [krippendorff.alpha(value_counts=_expand(items, w),
                                   level_of_measurement="ordinal") for w in weights]
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_weighted_statistics_are_nan_when_undefined():
    same = np.array([[3, 0, 0], [2, 0, 0]])  # every rating in one category
    assert np.isnan(stats.fleiss_kappa_weighted(same, [[1, 1]])).all()
    assert np.isnan(stats.krippendorff_alpha_weighted(same, [[1, 1]])).all()
    assert np.isnan(stats.fleiss_kappa_weighted([[1, 1, 0]], [[0]])).all()  # empty replicate


def test_ordinal_distance_hand_worked():
    # totals n = (2, 3, 5): d(0,1) = (2 + 3 - (2 + 3)/2)^2 = 2.5^2 = 6.25;
    # d(0,2) = (10 - 3.5)^2 = 42.25; d(1,2) = (8 - 4)^2 = 16; diagonal 0.
    d = stats.ordinal_distance([2, 3, 5])
    np.testing.assert_allclose(d, [[0, 6.25, 42.25], [6.25, 0, 16], [42.25, 16, 0]])
    stacked = stats.ordinal_distance([[2, 3, 5], [1, 1, 1]])
    np.testing.assert_allclose(stacked[0], d)


def test_within_item_std_over_a_leading_grid_equals_numpy():
    counts = np.array([[[1, 0, 1, 0, 0], [0, 0, 0, 0, 1]], [[0, 2, 0, 1, 0], [0, 0, 0, 0, 0]]])
    got = stats.within_item_std(counts, SCORES)
    assert got[0, 0] == pytest.approx(np.std([-2, 0], ddof=1))
    assert got[1, 0] == pytest.approx(np.std([-1, -1, 1], ddof=1))
    assert np.isnan(got[0, 1]) and np.isnan(got[1, 1])
