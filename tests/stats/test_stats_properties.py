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
