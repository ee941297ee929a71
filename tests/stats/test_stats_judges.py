"""Judge-agreement estimators against pingouin and scikit-learn."""

import numpy as np
import pandas as pd
import pingouin
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from clinieval.stats.judges import (
    cohen_kappa,
    icc3k,
    icc3k_z,
    leave_one_out_kappa,
    macro_f1,
    pairwise_rater_icc,
    zscore_columns,
)


def _pingouin_icc3k(table: np.ndarray) -> float:
    n, k = table.shape
    long = pd.DataFrame({"item": np.repeat(np.arange(n), k), "rater": np.tile(np.arange(k), n),
                         "score": table.reshape(-1)})
    icc = pingouin.intraclass_corr(long, targets="item", raters="rater", ratings="score")
    # pingouin >= 0.7 names ICC(3,k) "ICC(C,k)": consistency, mean of k raters.
    return float(icc.set_index("Type").loc["ICC(C,k)", "ICC"])


@pytest.mark.parametrize("seed", range(6))
def test_icc3k_matches_pingouin(seed):
    rng = np.random.default_rng(seed)
    n, k = rng.integers(3, 30), rng.integers(2, 5)
    truth = rng.normal(size=(n, 1))
    table = truth + rng.normal(0, 1.0, (n, k)) + rng.normal(0, 1, k)
    assert icc3k(table) == pytest.approx(_pingouin_icc3k(table), abs=1e-10)
    z = zscore_columns(table)
    assert icc3k_z(table) == pytest.approx(_pingouin_icc3k(z), abs=1e-10)


def test_icc3k_hand_worked():
    # Items (1,2), (3,3), (5,4): grand mean 3; item means 1.5, 3, 4.5
    # SS items = 2 * (2.25 + 0 + 2.25) = 9 -> MS items 4.5
    # rater means 3, 3 -> SS raters 0; SS total = 4+1+0+0+4+1 = 10 -> SS error 1
    # MS error = 1 / 2 = 0.5; ICC(3,k) = (4.5 - 0.5) / 4.5 = 8/9
    assert icc3k([[1, 2], [3, 3], [5, 4]]) == pytest.approx(8 / 9)


def test_icc3k_is_undefined_when_items_differ_only_by_rounding():
    # Two raters in opposite order on two items, z-scored: both item means
    # are 0 up to rounding, so there is no between-item variance to compare
    # with (before the guard this gave about -1e30).
    z = zscore_columns(np.array([[0.1, 0.7], [0.7, 0.1]]))
    assert np.isnan(icc3k(z))
    assert np.isnan(icc3k_z([[1.0, 3.0], [2.0, 1.0]]))


def test_pairwise_rater_icc_uses_pairs_with_shared_items():
    # Raters 0 and 1 share items 0..3; rater 2 shares only item 0 with them.
    item = [0, 1, 2, 3, 0, 1, 2, 3, 0, 4]
    rater = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    score = [1, 2, 3, 4, 2, 2, 4, 5, 1, 3]
    out = pairwise_rater_icc(item, rater, score)
    expected = _pingouin_icc3k(zscore_columns(np.array([[1, 2], [2, 2], [3, 4], [4, 5]])))
    assert out.values == pytest.approx([expected])
    assert (out.too_few, out.undefined) == (2, 0)


def test_rater_pairs_sharing_two_items_are_left_out_and_counted():
    # Two shared items z-score to (-0.71, 0.71) for each rater: an ICC of
    # exactly 1 when the pair agrees on the order, undefined when it does
    # not, so such pairs only add 1.0s. Pair (0, 1) shares items 0, 1 and
    # agrees; pair (0, 2) shares 0, 1 and disagrees; pair (1, 2) shares
    # items 0, 1, 2 and is kept.
    item = [0, 1, 0, 1, 2, 0, 1, 2]
    rater = [0, 0, 1, 1, 1, 2, 2, 2]
    score = [1, 2, 1, 3, 2, 3, 1, 4]
    out = pairwise_rater_icc(item, rater, score)
    expected = _pingouin_icc3k(zscore_columns(np.array([[1, 3], [3, 1], [2, 4]])))
    assert out.values == pytest.approx([expected])
    assert (out.too_few, out.undefined) == (2, 0)
    two = pairwise_rater_icc(item, rater, score, min_shared=2)
    assert sorted(two.values) == pytest.approx(sorted([1.0, expected]))
    assert (two.too_few, two.undefined) == (0, 1)


def test_kappa_and_macro_f1_match_scikit_learn():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(0, 3, 50)
        b = np.where(rng.random(50) < 0.6, a, rng.integers(0, 3, 50))
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
        assert macro_f1(a, b) == pytest.approx(f1_score(a, b, average="macro"), abs=1e-12)


def test_leave_one_out_kappa_judge_equal_to_majority():
    # Four clinicians; a judge that copies the majority of all four should
    # agree with each clinician at least as well as a random-label judge.
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 200)
    labels = np.column_stack([np.where(rng.random(200) < 0.85, truth, 1 - truth)
                              for _ in range(4)])
    judge_k, human_k = leave_one_out_kappa(truth, labels)
    noise_k, _ = leave_one_out_kappa(rng.integers(0, 2, 200), labels)
    assert judge_k.shape == human_k.shape == (4,)
    assert judge_k.min() > 0.5 and abs(noise_k).max() < 0.2


def test_self_preference_interval_carries_the_fitted_lines_uncertainty():
    # Few other answers (12) and own answers far along the reference (mean
    # 3 against 0): a slope error e moves the own residual by about 3e. With
    # the line held fixed the interval ignores that and misses the planted
    # 0.5 far more often than 5% of the time (82 of 200 covered); refitting
    # on each resample of the rest covers it 180 times of 200 (a percentile
    # interval from 12 answers runs a little short of 95%).
    from clinieval.stats import self_preference

    rng = np.random.default_rng(7)
    own = np.arange(52) < 40
    covered = 0
    for _ in range(200):
        x = np.where(own, rng.normal(3, 0.5, 52), rng.normal(0, 1, 52))
        y = 0.6 * x + rng.normal(0, 0.5, 52) + 0.5 * own
        c = self_preference(y, x, own, 400, rng)
        covered += c.lower <= 0.5 <= c.upper
    assert covered / 200 >= 0.85


def test_macro_f1_by_group_matches_scikit_learn_per_group():
    from clinieval.stats import macro_f1_by_group

    rng = np.random.default_rng(5)
    group = rng.integers(0, 30, 400)
    truth = rng.random(400) < 0.2
    predicted = np.where(rng.random(400) < 0.8, truth, ~truth)
    got = macro_f1_by_group(group, truth, predicted)
    for g in range(30):
        t, p = truth[group == g], predicted[group == g]
        # sklearn's default labels are those present in either list, as macro_f1's
        assert got[g] == pytest.approx(f1_score(t, p, average="macro"), abs=1e-12)
