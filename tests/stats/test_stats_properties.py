"""Invariances the estimators must respect, on generated data."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval import stats

votes = st.integers(0, 2**32 - 1).map(np.random.default_rng)


def draw_votes(rng, n_models=5, n_votes=120):
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    return a, b, rng.integers(0, 4, n_votes)


@settings(max_examples=30, deadline=None)
@given(votes)
def test_bt_equivariant_under_relabelling_and_side_swap(rng):
    a, b, outcome = draw_votes(rng)
    theta = stats.bt_fit(stats.outcome_table(a, b, outcome, 5))
    perm = rng.permutation(5)  # model i is called perm[i] after relabelling
    relabelled = stats.bt_fit(stats.outcome_table(perm[a], perm[b], outcome, 5))
    np.testing.assert_allclose(relabelled[perm], theta, atol=1e-8)
    swapped = np.array([1, 0, 2, 3])[outcome]  # B becomes A: wins flip, ties stay
    np.testing.assert_allclose(
        stats.bt_fit(stats.outcome_table(b, a, swapped, 5)), theta, atol=1e-8
    )


@settings(max_examples=30, deadline=None)
@given(votes)
def test_outcome_table_conserves_credit(rng):
    # Every kept vote hands out exactly one win in total (1 + 0 or 0.5 + 0.5).
    a, b, outcome = draw_votes(rng)
    table = stats.outcome_table(a, b, outcome, 5, tie_mode="drop")
    assert table.sum() == np.sum(outcome != 2)
    assert stats.outcome_table(a, b, outcome, 5).sum() == outcome.size


def rated_counts(rng):
    counts = rng.multinomial(rng.integers(2, 6), rng.dirichlet(np.ones(4)), size=12)
    counts[rng.random(12) < 0.3, :] = 0  # items nobody rated
    return counts


@settings(max_examples=40, deadline=None)
@given(votes)
def test_fleiss_invariant_to_duplicating_items(rng):
    counts = rated_counts(rng)
    doubled = np.vstack([counts, counts])
    assert np.isclose(stats.fleiss_kappa(doubled), stats.fleiss_kappa(counts), equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(votes)
def test_krippendorff_bounded_and_one_for_unanimous_items(rng):
    counts = rated_counts(rng)
    for level in ("nominal", "ordinal", "interval"):
        alpha = stats.krippendorff_alpha(counts, level)
        assert np.isnan(alpha) or alpha <= 1.0 + 1e-12
    unanimous = np.zeros_like(counts)
    unanimous[np.arange(12), rng.integers(0, 4, 12)] = 3
    if len(np.unique(unanimous.argmax(axis=1))) > 1:
        assert np.isclose(stats.krippendorff_alpha(unanimous, "ordinal"), 1.0)


@settings(max_examples=40, deadline=None)
@given(votes, st.integers(2, 4), st.integers(2, 6), st.floats(0.01, 0.6))
def test_two_way_replicates_of_shares_and_means_stay_in_their_range(rng, raters, cases, rate):
    # As the audit: each rating one count in its (group, score) column; per
    # group the share of scores <= -1 (0..1) and the mean score (-2..2), and
    # the difference of the two groups' shares (-1..1). The calibration
    # scales replicate deviations up (6.5-fold with two clusters: t(1) over
    # z), which must not carry a replicate past what any data could give (a
    # 40% vs 0% gap read [0.0, 165.6] points).
    n = int(rng.integers(10, 60))
    rater, case = rng.integers(0, raters, n), rng.integers(0, cases, n)
    group = rng.integers(0, 2, n)
    score = np.where(rng.random(n) < rate, -2, rng.integers(-1, 3, n))
    counts = np.zeros((n, 10))
    counts[np.arange(n), group * 5 + score + 2] = 1
    scores = np.arange(-2, 3.0)
    num = np.zeros((10, 4))
    den = np.zeros((10, 4))
    for g in (0, 1):
        rows = slice(5 * g, 5 * g + 5)
        num[rows, 2 * g], num[rows, 2 * g + 1] = scores <= -1, scores
        den[rows, 2 * g], den[rows, 2 * g + 1] = 1, 1
    contrasts = np.array([[1.0], [0.0], [-1.0], [0.0]])  # share in group 0 minus group 1
    reps, _ = stats.crossed_ratio_bootstrap(rater, case, counts, num, den, 200, rng,
                                            contrasts=contrasts)
    share, mean, diff = reps[:, [0, 2]], reps[:, [1, 3]], reps[:, 4]
    assert np.nanmin(share, initial=0) >= 0 and np.nanmax(share, initial=1) <= 1
    assert np.nanmin(mean, initial=-2) >= -2 and np.nanmax(mean, initial=2) <= 2
    assert np.nanmin(diff, initial=-1) >= -1 and np.nanmax(diff, initial=1) <= 1
