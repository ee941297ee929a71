import time

import choix
import numpy as np
import pytest
import statsmodels.api as sm

from clinieval import stats
from clinieval.stats import ConvergenceError


def random_votes(seed, n_models, n_votes, tie_share=0.0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    strength = rng.normal(0.0, 1.0, n_models)
    a_wins = rng.random(n_votes) < 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
    outcome = np.where(a_wins, 0, 1)
    outcome[rng.random(n_votes) < tie_share] = 2
    return a, b, outcome


def glm_strengths(a, b, y, n_models):
    design = np.zeros((a.size, n_models))
    design[np.arange(a.size), a] = 1.0
    design[np.arange(a.size), b] = -1.0
    fit = sm.GLM(y, design[:, 1:], family=sm.families.Binomial()).fit(tol=1e-12)
    theta = np.concatenate([[0.0], fit.params])
    return theta - theta.mean(), fit


# --- outcome tables --------------------------------------------------------


def test_outcome_table_hand_worked():
    # votes: 0 beats 1, 1 beats 0, 1 ties 2, 2 and 0 both unacceptable.
    # "half": W[0,1]=1, W[1,0]=1, W[1,2]=W[2,1]=0.5, W[2,0]=W[0,2]=0.5
    a, b, outcome = [0, 0, 1, 2], [1, 1, 2, 0], [0, 1, 2, 3]
    half = stats.outcome_table(a, b, outcome, 3)
    np.testing.assert_array_equal(half, [[0, 1, 0.5], [1, 0, 0.5], [0.5, 0.5, 0]])
    # "drop" for ties only keeps the both-unacceptable half wins
    dropped = stats.outcome_table(a, b, outcome, 3, tie_mode="drop")
    np.testing.assert_array_equal(dropped, [[0, 1, 0.5], [1, 0, 0], [0.5, 0, 0]])
    none = stats.outcome_table(a, b, outcome, 3, tie_mode="drop", bothbad_mode="drop")
    assert none.sum() == 2


def test_outcome_table_cell_form_equals_vote_form():
    a, b, outcome = random_votes(1, 6, 500, tie_share=0.2)
    cells, counts = stats.collapse_votes(a, b, outcome)
    assert counts.sum() == 500 and len(cells) < 500
    np.testing.assert_allclose(
        stats.outcome_table(cells[:, 0], cells[:, 1], cells[:, 2], 6, counts=counts),
        stats.outcome_table(a, b, outcome, 6),
    )


def test_cluster_tables_sum_to_overall_table():
    a, b, outcome = random_votes(2, 5, 300, tie_share=0.1)
    cluster = np.random.default_rng(0).integers(0, 7, 300)
    tables = stats.cluster_outcome_tables(a, b, outcome, cluster, 5, 7)
    assert tables.shape == (7, 5, 5)
    with pytest.raises(ValueError):
        stats.cluster_outcome_tables(a, b, outcome, cluster, 5, 6)
    np.testing.assert_allclose(tables.sum(axis=0), stats.outcome_table(a, b, outcome, 5))


@pytest.mark.parametrize(
    "a, b, outcome",
    [([0], [0], [0]), ([0], [5], [0]), ([0], [1], [4]), ([0, 1], [1], [0]), ([0, 1], [1, 2], [0])],
)
def test_outcome_table_rejects_bad_votes(a, b, outcome):
    with pytest.raises(ValueError):
        stats.outcome_table(a, b, outcome, 3)


def test_pairwise_response_codes():
    y, keep = stats.pairwise_response([0, 1, 2, 3], bothbad_mode="drop")
    np.testing.assert_array_equal(keep, [True, True, True, False])
    np.testing.assert_array_equal(y[keep], [1.0, 0.0, 0.5])


# --- fitting ---------------------------------------------------------------


def test_two_models_closed_form():
    # 6 wins of model 0 over 1 against 2 the other way. The ML estimate is
    # theta_0 - theta_1 = log(6/2); centred, theta_0 = log(3)/2 = 0.549306...
    # A tie split in halves gives the same table: 5 + 1 wins against 1 + 1.
    expected = np.array([np.log(3) / 2, -np.log(3) / 2])
    np.testing.assert_allclose(stats.bt_fit([[0, 6], [2, 0]], alpha=0.0), expected, atol=1e-12)
    ties = stats.outcome_table([0] * 8, [1] * 8, [0] * 5 + [1] + [2] * 2, 2)
    np.testing.assert_allclose(stats.bt_fit(ties, alpha=0.0), expected, atol=1e-12)


def test_balanced_cycle_gives_equal_strengths():
    # 0 > 1, 1 > 2, 2 > 0, each 3 to 1: every model wins 6 of 12, so all equal.
    table = np.array([[0, 3, 1], [1, 0, 3], [3, 1, 0]])
    np.testing.assert_allclose(stats.bt_fit(table, alpha=0.0), 0.0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bt_fit_matches_choix(seed):
    a, b, outcome = random_votes(seed, 8, 600)
    pairs = [(x, y) if o == 0 else (y, x) for x, y, o in zip(a, b, outcome, strict=True)]
    reference = choix.opt_pairwise(8, pairs, alpha=1e-6, tol=1e-10)
    got = stats.bt_fit(stats.outcome_table(a, b, outcome, 8), alpha=1e-6)
    np.testing.assert_allclose(got, reference - reference.mean(), atol=1e-4)
    assert abs(got.mean()) < 1e-12


@pytest.mark.parametrize("seed", [3, 4])
def test_bt_fit_matches_logistic_regression(seed):
    a, b, outcome = random_votes(seed, 6, 800)
    expected, _ = glm_strengths(a, b, (outcome == 0).astype(float), 6)
    table = stats.outcome_table(a, b, outcome, 6)
    np.testing.assert_allclose(stats.bt_fit(table, alpha=1e-8), expected, atol=1e-4)
    np.testing.assert_allclose(stats.bt_fit(table, alpha=0.0), expected, atol=1e-8)


def test_winless_model_is_finite_with_ridge_and_raises_without():
    table = np.array([[0, 5, 3], [4, 0, 2], [0, 0, 0]], dtype=float)  # model 2 never wins
    theta = stats.bt_fit(table)
    assert np.all(np.isfinite(theta)) and theta[2] == theta.min()
    with pytest.raises(ConvergenceError):
        stats.bt_fit(table, alpha=0.0)


def test_disconnected_graph_without_ridge_raises():
    table = np.array([[0, 2, 0, 0], [1, 0, 0, 0], [0, 0, 0, 3], [0, 0, 1, 0]], dtype=float)
    with pytest.raises(ConvergenceError):
        stats.bt_fit(table, alpha=0.0)
    assert np.all(np.isfinite(stats.bt_fit(table)))


def test_fit_many_equals_one_at_a_time():
    tables = np.stack([stats.outcome_table(*random_votes(seed, 5, 200), 5) for seed in range(4)])
    batched = stats.bt_fit_many(tables)
    for table, row in zip(tables, batched, strict=True):
        np.testing.assert_allclose(row, stats.bt_fit(table), atol=1e-9)


def test_fit_many_from_a_start_reaches_the_same_fit():
    # Started anywhere (here far off and not centred), Newton ends at the
    # same optimum as from 0.
    tables = np.stack([stats.outcome_table(*random_votes(seed, 5, 200), 5) for seed in range(4)])
    started = stats.bt_fit_many(tables, start=np.array([3.0, -1.0, 0.5, 2.0, 4.0]))
    np.testing.assert_allclose(started, stats.bt_fit_many(tables), atol=1e-9)


# --- bootstrap -------------------------------------------------------------


def test_bt_bootstrap_reproducible_and_seed_sensitive():
    cells, counts = stats.collapse_votes(*random_votes(5, 6, 400, tie_share=0.1))
    first = stats.bt_bootstrap(cells, counts, 6, 50, np.random.default_rng(7))
    again = stats.bt_bootstrap(cells, counts, 6, 50, np.random.default_rng(7))
    other = stats.bt_bootstrap(cells, counts, 6, 50, np.random.default_rng(8))
    assert first.shape == (50, 6)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)
    np.testing.assert_allclose(first.mean(axis=1), 0.0, atol=1e-10)


def test_bt_bootstrap_spread_matches_observed_information():
    # For many votes the bootstrap SD of the centred strengths should be close
    # to the asymptotic SE from the logistic fit's observed information.
    a, b, outcome = random_votes(6, 5, 6000)
    fit = stats.bt_with_features(a, b, (outcome == 0).astype(float), None, 5)
    cells, counts = stats.collapse_votes(a, b, outcome)
    reps = stats.bt_bootstrap(cells, counts, 5, 2000, np.random.default_rng(1))
    np.testing.assert_allclose(reps.std(axis=0), fit.strength_se, rtol=0.08)
    np.testing.assert_allclose(reps.mean(axis=0), fit.strengths, atol=0.02)


def test_bt_bootstrap_equals_vote_resampling_in_distribution():
    a, b, outcome = random_votes(9, 4, 400, tie_share=0.15)
    rng = np.random.default_rng(2)
    brute = np.stack(
        [
            stats.outcome_table(a[i], b[i], outcome[i], 4)
            for i in rng.integers(0, a.size, size=(1500, a.size))
        ]
    )
    brute_sd = stats.bt_fit_many(brute).std(axis=0)
    cells, counts = stats.collapse_votes(a, b, outcome)
    ours_sd = stats.bt_bootstrap(cells, counts, 4, 1500, rng).std(axis=0)
    np.testing.assert_allclose(ours_sd, brute_sd, rtol=0.12)


def test_bt_bootstrap_is_fast():
    cells, counts = stats.collapse_votes(*random_votes(10, 13, 18000, tie_share=0.1))
    start = time.perf_counter()
    reps = stats.bt_bootstrap(cells, counts, 13, 1000, np.random.default_rng(0))
    assert time.perf_counter() - start < 2.0  # about 0.2 s on a laptop core
    assert np.all(np.isfinite(reps))


def test_cluster_bootstrap_with_singleton_clusters_matches_vote_bootstrap():
    a, b, outcome = random_votes(11, 4, 500)
    tables = stats.cluster_outcome_tables(a, b, outcome, np.arange(500), 4, 500)
    clustered = stats.bt_cluster_bootstrap(tables, 1500, np.random.default_rng(3))
    cells, counts = stats.collapse_votes(a, b, outcome)
    plain = stats.bt_bootstrap(cells, counts, 4, 1500, np.random.default_rng(4))
    np.testing.assert_allclose(clustered.std(axis=0), plain.std(axis=0), rtol=0.12)


def test_cluster_bootstrap_widens_for_correlated_clusters():
    # Each rater votes the same way on all 40 of their votes (perfectly
    # correlated within rater), so resampling raters must show far more spread
    # than pretending the 800 votes are independent.
    rng = np.random.default_rng(12)
    rater = np.repeat(np.arange(20), 40)
    outcome = np.repeat(rng.integers(0, 2, 20), 40)
    a, b = np.zeros(800, dtype=int), np.ones(800, dtype=int)
    tables = stats.cluster_outcome_tables(a, b, outcome, rater, 2, 20)
    clustered = stats.bt_cluster_bootstrap(tables, 400, np.random.default_rng(0), alpha=1e-3)
    cells, counts = stats.collapse_votes(a, b, outcome)
    plain = stats.bt_bootstrap(cells, counts, 2, 400, np.random.default_rng(0), alpha=1e-3)
    assert clustered[:, 0].std() > 3 * plain[:, 0].std()


def test_rank_intervals_hand_worked():
    # point estimate: model 0 best, then 2, then 1 -> ranks 1, 3, 2
    estimate = np.array([0.5, -0.5, 0.0])
    # five replicates; sorted replicate ranks per model:
    #   model 0: 1 1 1 1 2   model 1: 2 3 3 3 3   model 2: 1 2 2 2 3
    samples = np.array([[1, -1, 0], [1, -1, 0], [1, 0, -1], [0, -1, 1], [1, -1, 0]], dtype=float)
    ranks = stats.rank_intervals(estimate, samples, level=0.5)
    np.testing.assert_array_equal(ranks.rank, [1, 3, 2])
    # level 0.5: quantile positions (5-1)*0.25 = 1 and (5-1)*0.75 = 3, i.e.
    # the 2nd and 4th order statistics
    np.testing.assert_array_equal(ranks.lower, [1, 3, 2])
    np.testing.assert_array_equal(ranks.upper, [1, 3, 2])
    # level 0.95: positions 0.1 and 3.9, rounded outward to the 1st and 5th
    wide = stats.rank_intervals(estimate, samples, level=0.95)
    np.testing.assert_array_equal(wide.lower, [1, 2, 1])
    np.testing.assert_array_equal(wide.upper, [2, 3, 3])


# --- style control ---------------------------------------------------------


def style_data(seed, n_votes, n_models):
    rng = np.random.default_rng(seed)
    a, b, _ = random_votes(seed, n_models, n_votes)
    length = rng.gamma(3.0, 100.0, size=(n_votes, 2))
    feature = stats.length_feature(length[:, 0], length[:, 1])
    strength = rng.normal(0.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b] + 0.4 * feature)))
    y = (rng.random(n_votes) < p).astype(float)
    y[rng.random(n_votes) < 0.1] = 0.5
    return a, b, y, feature[:, None]


def test_bt_with_features_matches_statsmodels():
    a, b, y, X = style_data(13, 3000, 6)
    weights = np.random.default_rng(0).integers(1, 3, a.size).astype(float)
    got = stats.bt_with_features(a, b, y, X, 6, weights=weights)
    design = np.zeros((a.size, 6))
    design[np.arange(a.size), a] = 1.0
    design[np.arange(a.size), b] = -1.0
    design = np.hstack([design[:, 1:], X])
    ref = sm.GLM(y, design, family=sm.families.Binomial(), freq_weights=weights).fit(tol=1e-12)
    np.testing.assert_allclose(got.feature_coef, ref.params[-1:], atol=1e-5)
    np.testing.assert_allclose(got.feature_se, ref.bse[-1:], atol=1e-5)
    theta = np.concatenate([[0.0], ref.params[:5]])
    np.testing.assert_allclose(got.strengths, theta - theta.mean(), atol=1e-5)
    # SE of a centred strength: contrast c' params with c from the centring
    contrast = np.eye(6)[:, 1:] - 1.0 / 6  # theta_i - mean(theta) per row
    cov = ref.cov_params()[:5, :5]
    np.testing.assert_allclose(
        got.strength_se, np.sqrt(np.einsum("ij,jk,ik->i", contrast, cov, contrast)), atol=1e-5
    )


def test_bt_with_features_equals_the_dense_logistic_fit():
    # The fit never forms the +1/-1 design; with it formed, the plain
    # logistic IRLS takes the same steps to the same numbers (up to the order
    # of sums), with and without features, weights and merged duplicate rows.
    a, b, y, X = style_data(16, 4000, 7)
    weights = np.random.default_rng(1).integers(1, 4, a.size).astype(float)
    design = np.zeros((a.size, 7))
    design[np.arange(a.size), a] = 1.0
    design[np.arange(a.size), b] = -1.0
    for feats in (X, None):
        dense = design[:, [0, 1, 2, 4, 5, 6]]
        dense = dense if feats is None else np.hstack([dense, feats])
        ref = stats.logistic_irls(dense, y, weights)
        got = stats.bt_with_features(a, b, y, feats, 7, weights=weights, reference=3).fit
        np.testing.assert_allclose(got.coef, ref.coef, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got.cov, ref.cov, rtol=1e-10, atol=1e-14)
        assert got.n_iter == ref.n_iter


def test_bt_with_features_does_not_depend_on_reference_model():
    a, b, y, X = style_data(14, 1000, 5)
    first = stats.bt_with_features(a, b, y, X, 5, reference=0)
    last = stats.bt_with_features(a, b, y, X, 5, reference=4)
    np.testing.assert_allclose(first.strengths, last.strengths, atol=1e-9)
    np.testing.assert_allclose(first.strength_se, last.strength_se, atol=1e-9)
    np.testing.assert_allclose(first.feature_coef, last.feature_coef, atol=1e-9)


def test_bt_with_features_fast_on_20k_rows():
    a, b, y, X = style_data(15, 20000, 13)
    start = time.perf_counter()
    fit = stats.bt_with_features(a, b, y, X, 13)
    assert time.perf_counter() - start < 2.0  # about 0.05 s on a laptop core
    assert fit.fit.converged and fit.strengths.shape == (13,)


def test_length_feature_hand_worked():
    # (100-50)/150 = 1/3 and 0; root mean square = sqrt((1/9)/2) = 1/(3 sqrt 2),
    # so the scaled values are sqrt(2) and 0.
    np.testing.assert_allclose(stats.length_feature([100, 50], [50, 50]), [np.sqrt(2), 0.0])
    np.testing.assert_allclose(
        stats.length_feature([10, 30], [30, 10]), -stats.length_feature([30, 10], [10, 30])
    )


def test_objective_hand_worked():
    # W[0,1] = 3, W[1,0] = 1 at theta = (0.5, -0.5), alpha = 0.1:
    # 3 log(1 + e^-1) + 1 log(1 + e^1) + 0.1 (0.25 + 0.25)
    expected = 3 * np.log1p(np.exp(-1.0)) + np.log1p(np.exp(1.0)) + 0.05
    assert stats.bt_objective([[0, 3], [1, 0]], [0.5, -0.5], 0.1) == pytest.approx(
        expected, abs=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_and_hessian_match_finite_differences(seed):
    """Central differences of the objective give the gradient, and of the
    gradient give the Hessian (the check choix runs on its own derivatives)."""
    rng = np.random.default_rng(seed)
    table = rng.integers(0, 6, size=(5, 5)).astype(float)
    np.fill_diagonal(table, 0)
    theta, alpha, h = rng.normal(size=5), 0.3, 1e-5
    steps = h * np.eye(5)
    numeric_grad = [(stats.bt_objective(table, theta + e, alpha)
                     - stats.bt_objective(table, theta - e, alpha)) / (2 * h) for e in steps]
    np.testing.assert_allclose(stats.bt_gradient(table, theta, alpha), numeric_grad,
                               rtol=1e-6, atol=1e-7)
    numeric_hess = np.array([(stats.bt_gradient(table, theta + e, alpha)
                              - stats.bt_gradient(table, theta - e, alpha)) / (2 * h)
                             for e in steps])
    np.testing.assert_allclose(stats.bt_hessian(table, theta, alpha), numeric_hess,
                               rtol=1e-6, atol=1e-7)


def test_fitted_strengths_zero_the_gradient():
    table = np.array([[0, 4, 2], [1, 0, 3], [2, 2, 0]], dtype=float)
    theta = stats.bt_fit(table, alpha=0.01)
    np.testing.assert_allclose(stats.bt_gradient(table, theta, 0.01), 0, atol=1e-8)
