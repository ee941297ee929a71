"""Confidence sequences: hand-worked cases, the reference (confseq), the fast
verdict path against the grid, validity on i.i.d. and IPW-weighted streams.

confseq is a test extra; its tests skip without it, and fail instead with
CLINIEVAL_REQUIRE_CONFSEQ=1 (CI), where a skip would hide a broken install."""

import importlib
import math
import os

import numpy as np
import pytest

from clinieval.stats import sequences as seq

ALPHA = 0.05


def confseq_betting():
    """confseq's ``betting`` module, else a skip (a failure under
    CLINIEVAL_REQUIRE_CONFSEQ=1). confseq 0.0.11's type annotations name
    ``np.float_``, which NumPy 2 removed: the alias stands only while its
    modules are imported, so no other test can come to rely on it."""
    alias = not hasattr(np, "float_")
    if alias:
        np.float_ = np.float64
    try:
        return importlib.import_module("confseq.betting")
    except ImportError as error:
        if os.environ.get("CLINIEVAL_REQUIRE_CONFSEQ") == "1":
            pytest.fail(f"CLINIEVAL_REQUIRE_CONFSEQ=1 but confseq does not import: {error}")
        pytest.skip(f"confseq does not import ({error}): install the test extras")
    finally:
        if alias:
            del np.float_


def test_plugin_bets_hand_worked():
    # alpha = 0.025 (one side of 0.05): 2 log(40) = 7.3777589.
    # t=1: s2_0 = 1/4:                     sqrt(7.3777589 / (1 log 2 / 4))   = 6.5249847
    # t=2: mu_1 = (1/2 + 1)/2 = 3/4, s2_1 = (1/4 + 1/16)/2 = 0.15625:
    #      sqrt(7.3777589 / (2 log 3 * 0.15625)) = 4.6356965
    # t=3: mu_2 = (1/2 + 1)/3 = 1/2, s2_2 = (1/4 + 1/16 + 1/4)/3 = 0.1875:
    #      sqrt(7.3777589 / (3 log 4 * 0.1875))  = 3.0759073
    bets = seq.plugin_bets([1.0, 0.0, 0.0], 0.025)
    np.testing.assert_allclose(bets, [6.5249847, 4.6356965, 3.0759073], atol=1e-7)


def test_betting_cs_hand_worked_zeros():
    # x = 0, 0, 0 on the grid 0, 0.1, ..., 1. The upper side is K-(m) =
    # prod (1 + l_i m) with l_i = min(bet_i, 0.5 / (1 - m)); it excludes m
    # once (1 - theta) K- > 1/alpha, i.e. K- > 40. Bets 6.525, 4.636, 3.955
    # (s2_2 = (1/4 + 1/16 + 1/36) / 3).
    # m = 0.8: truncation 2.5 binds: K- = 3, 9, 27           -> kept
    # m = 0.9: l = 5, 4.636, 3.955: K- = 5.5, 28.45, 129.7   -> out at t = 3
    # m = 1.0: l = bets: K- = 7.525, 42.41                    -> out at t = 2
    # Upper bound = last kept + 0.1: 0.9 + 0.1, 0.9 + 0.1, 0.8 + 0.1.
    x = np.zeros(3)
    bets = seq.plugin_bets(x, 0.025)
    np.testing.assert_allclose(np.exp(seq.log_capital(x, bets, 0.8, -1)), [3, 9, 27])
    np.testing.assert_allclose(np.exp(seq.log_capital(x, bets, 0.9, -1)),
                               [5.5, 28.4466976, 129.6960075], rtol=1e-8)
    cs = seq.betting_cs(x, breaks=10)
    np.testing.assert_allclose(cs.upper, [1.0, 1.0, 0.9])
    np.testing.assert_allclose(cs.lower, [0.0, 0.0, 0.0])


def test_empirical_bernstein_matches_the_formula_step_by_step():
    rng = np.random.default_rng(3)
    x = rng.beta(1, 6, 60)
    cs = seq.empirical_bernstein_cs(x, ALPHA, running_intersection=False)
    log2a = math.log(2 / ALPHA)
    num = den = spread = 0.0
    total, var_sum = 0.0, 0.0
    for t, xi in enumerate(x, start=1):
        mean_before = (0.5 + total) / t
        s2_before = (0.25 + var_sum) / t
        lam = min(math.sqrt(2 * log2a / (t * math.log(1 + t) * s2_before)), 0.5)
        num, den = num + lam * xi, den + lam
        spread += (xi - mean_before) ** 2 * (-math.log(1 - lam) - lam)
        total += xi
        var_sum += (xi - (0.5 + total) / (t + 1)) ** 2
        margin = (log2a + spread) / den
        assert cs.lower[t - 1] == pytest.approx(max(0.0, num / den - margin), abs=1e-12)
        assert cs.upper[t - 1] == pytest.approx(min(1.0, num / den + margin), abs=1e-12)


def test_running_intersection_is_monotone_and_nested():
    rng = np.random.default_rng(5)
    x = rng.random((4, 300)) < [[0.05], [0.1], [0.3], [0.6]]
    raw = seq.betting_cs(x, running_intersection=False, breaks=200)
    cs = seq.betting_cs(x, breaks=200)
    assert np.all(np.diff(cs.lower, axis=1) >= 0) and np.all(np.diff(cs.upper, axis=1) <= 0)
    assert np.all(cs.lower >= raw.lower) and np.all(cs.upper <= raw.upper)
    assert np.all((0 <= cs.lower) & (cs.upper <= 1))
    # Stacked streams give the rows' own sequences.
    np.testing.assert_array_equal(seq.betting_cs(x[2], breaks=200).upper, cs.upper[2])


def test_betting_is_narrower_than_empirical_bernstein():
    rng = np.random.default_rng(6)
    x = (rng.random((20, 400)) < 0.1).astype(float)
    bet = seq.betting_cs(x, breaks=500)
    eb = seq.empirical_bernstein_cs(x)
    width_bet = (bet.upper - bet.lower)[:, [49, 199, 399]].mean(axis=0)
    width_eb = (eb.upper - eb.lower)[:, [49, 199, 399]].mean(axis=0)
    assert np.all(width_bet < width_eb), (width_bet, width_eb)


@pytest.mark.parametrize("p", [0.02, 0.1, 0.35, 0.5])
def test_hedged_betting_cs_equals_confseq(p):
    betting = confseq_betting()
    rng = np.random.default_rng(int(p * 100))
    x = (rng.random(300) < p).astype(float)
    ours = seq.betting_cs(x, ALPHA)
    ref_lower, ref_upper = betting.hedged_cs(x, alpha=ALPHA, breaks=1000,
                                             running_intersection=True)
    np.testing.assert_allclose(ours.lower, ref_lower, atol=1e-12)
    np.testing.assert_allclose(ours.upper, ref_upper, atol=1e-12)
    raw = seq.betting_cs(x, ALPHA, running_intersection=False, breaks=500)
    ref_lower, ref_upper = betting.betting_cs(x, alpha=ALPHA, breaks=500)
    np.testing.assert_allclose(raw.lower, ref_lower, atol=1e-12)
    np.testing.assert_allclose(raw.upper, ref_upper, atol=1e-12)


def test_hedged_betting_cs_equals_confseq_on_values_in_between():
    betting = confseq_betting()
    x = np.random.default_rng(9).beta(2, 9, 250)
    ours = seq.betting_cs(x, 0.1, breaks=400)
    ref_lower, ref_upper = betting.hedged_cs(x, alpha=0.1, breaks=400)
    np.testing.assert_allclose(ours.lower, ref_lower, atol=1e-12)
    np.testing.assert_allclose(ours.upper, ref_upper, atol=1e-12)


def test_fast_verdicts_equal_the_grid():
    rng = np.random.default_rng(7)
    streams = np.concatenate([
        (rng.random((30, 250)) < rng.uniform(0.02, 0.3, (30, 1))).astype(float),
        rng.beta(1, 5, (10, 250)),
    ])
    cs = seq.betting_cs(streams, breaks=300)
    for thr in (0.05, 0.1, 0.1 + 1 / 300, 0.2):
        for direction in seq.DIRECTIONS:
            grid = seq.decide(cs.lower[:, -1], cs.upper[:, -1], thr, direction)
            fast = [seq.settled_verdict(s, thr, direction, breaks=300) for s in streams]
            assert list(grid) == fast
            for s, low, up in zip(streams[:8], cs.lower[:8], cs.upper[:8], strict=True):
                verdict, n = seq.first_settled(s, thr, direction, breaks=300)
                looks = seq.decide(low, up, thr, direction)
                settled = np.flatnonzero(looks != seq.OPEN)
                assert n == (settled[0] + 1 if settled.size else None)
                assert verdict == (looks[settled[0]] if settled.size else seq.OPEN)


def test_decide_hand_cases():
    assert seq.decide(0.02, 0.09, 0.10) == seq.PASS
    assert seq.decide(0.02, 0.10, 0.10) == seq.PASS  # upper <= threshold
    assert seq.decide(0.10, 0.30, 0.10) == seq.OPEN  # lower must exceed it
    assert seq.decide(0.11, 0.30, 0.10) == seq.FAIL
    assert seq.decide(0.15, 0.09, 0.10) == seq.OPEN  # an empty intersection
    assert seq.decide(0.6, 0.9, 0.6, seq.AT_LEAST) == seq.PASS
    assert seq.decide(0.2, 0.59, 0.6, seq.AT_LEAST) == seq.FAIL
    assert list(seq.decide([0.0, 0.2], [0.05, 0.4], 0.1)) == [seq.PASS, seq.FAIL]
    with pytest.raises(ValueError):
        seq.decide(0.1, 0.2, 0.1, "below")


def test_bad_input():
    with pytest.raises(ValueError):
        seq.betting_cs([0.2, 1.3])
    with pytest.raises(ValueError):
        seq.betting_cs([])
    with pytest.raises(ValueError):
        seq.betting_cs([0.2], alpha=1.0)
    with pytest.raises(ValueError):
        seq.ipw_betting_cs([0.2, 0.3], [1.0, 0.0])


def test_anytime_validity_on_iid_bernoulli():
    # A miss is a look at which the upper bound is below p or the lower
    # above it: the first fail time at threshold p in either direction.
    rng = np.random.default_rng(11)
    for p in (0.1, 0.5):
        x = (rng.random((300, 1000)) < p).astype(float)
        misses = sum(
            seq.crossing_times(s, p, seq.AT_LEAST)[1] is not None
            or seq.crossing_times(s, p, seq.AT_MOST)[1] is not None
            for s in x)
        assert misses <= 25, (p, misses)  # 5 % of 300 is 15; P(Bin(300, .05) > 25) < 0.01


def test_ipw_with_unit_weights_is_the_betting_cs():
    x = (np.random.default_rng(2).random(200) < 0.2).astype(float)
    ipw = seq.ipw_betting_cs(x, np.ones_like(x), breaks=250)
    bet = seq.betting_cs(x, breaks=250)
    np.testing.assert_array_equal(ipw.lower, bet.lower)
    np.testing.assert_array_equal(ipw.upper, bet.upper)


def test_ipw_cs_covers_under_targeted_picks():
    # 200 answers with planted values; each step picks answer j with a
    # known probability favouring answers whose last look was a fail
    # (adaptive, predictable), 10 % spread evenly to keep every one positive.
    rng = np.random.default_rng(4)
    n_answers, steps, reps = 200, 300, 60
    values = (rng.random(n_answers) < 0.15).astype(float)
    truth = values.mean()
    misses = 0
    for _ in range(reps):
        seen = np.zeros(n_answers)
        x, w = np.empty(steps), np.empty(steps)
        for t in range(steps):
            score = 1.0 + 4.0 * seen
            probs = 0.9 * score / score.sum() + 0.1 / n_answers
            j = rng.choice(n_answers, p=probs)
            x[t], w[t] = values[j], 1.0 / (n_answers * probs[j])
            seen[j] = values[j]
        cs = seq.ipw_betting_cs(x, w, breaks=200)
        misses += bool(np.any((cs.lower > truth) | (cs.upper < truth)))
    assert misses <= 7, misses  # 5 % of 60 is 3


def test_expected_to_settle_hand_worked_and_against_the_sequence():
    # p = 0: bets sit at the truncation 1/2 and the margin is
    # log(40) / (t / 2) <= 0.1 from t = 74 on; 10 answers are in.
    assert seq.expected_to_settle(0.0, 10, 0.1) == 64.0
    assert seq.expected_to_settle(0.1, 10, 0.1) == math.inf
    np.testing.assert_array_equal(seq.expected_to_settle([0.0, 0.0], [80, 10], 0.1), [0, 64])
    # A margin of 0.05 halves the distance: log(40) / (t / 2) <= 0.05 from t = 148.
    assert seq.expected_to_settle(0.0, 10, 0.1, margin=0.05) == 138.0
    assert seq.expected_to_settle(0.0, 10, 0.1, margin=0.2) == math.inf
    rng = np.random.default_rng(8)
    for p in (0.03, 0.2):
        predicted = seq.expected_to_settle(p, 0, 0.1)
        stops = [seq.first_settled(s, 0.1)[1] or 5000
                 for s in (rng.random((60, 5000)) < p).astype(float)]
        assert predicted / 2 <= np.median(stops) <= predicted * 2, (p, predicted,
                                                                   np.median(stops))


def test_rater_margin_hand_worked():
    # Answers x = 1, 0, 1, 0 rated once each by raters 0, 1, 0, 1; alpha 0.05,
    # t quantile with R - 1 = 1 df: 12.7062047; k = 1 rating per answer, so
    # no deflation.
    # t=1: one rater -> 1 (no verdict).
    # t=2: m = (1, 0), centre 1/2, SSB = 1/4 + 1/4 = 1/2, s2 = var(1, 0) = 1/2:
    #      SSB - s2 = 0 -> tau2 = 0 -> margin 0.
    # t=3: n = (2, 1), m = (1, 0), centre 2/3, SSB = 2/9 + 4/9 = 2/3,
    #      s2 = var(1, 0, 1) = 1/3, N - sum n^2 / N = 3 - 5/3 = 4/3,
    #      tau2 = (2/3 - 1/3) / (4/3) = 1/4, margin = 12.7062 sqrt(5/4) / 3 = 4.7353229
    # t=4: n = (2, 2), m = (1, 0), centre 1/2, SSB = 1, s2 = 1/3,
    #      N - sum n^2 / N = 2, tau2 = 1/3, margin = 12.7062 sqrt(8/3) / 4 = 5.1872864
    margin = seq.rater_margin([0, 1, 2, 3], [0, 1, 0, 1], [1.0, 0.0, 1.0, 0.0], 0.05)
    np.testing.assert_allclose(margin, [1.0, 0.0, 4.7353229, 5.1872864], atol=1e-6)


def test_rater_margin_covers_the_panels_gap():
    # Rater r fails an answer with probability q_r = expit(-2.2 + v_r), v_r ~
    # N(0, 0.6): the panel's rate is the mean of its q_r, the population's
    # the mean over the rater population. The margin at alpha = 0.1 should
    # cover the gap about 90 % of the time.
    from scipy.special import expit

    rng = np.random.default_rng(12)
    population = expit(-2.2 + rng.normal(0, 0.6, 400_000)).mean()
    n_answers, n_raters, per_answer, hits = 800, 20, 3, 0
    answers = np.repeat(np.arange(n_answers), per_answer)
    for _ in range(120):
        q = expit(-2.2 + rng.normal(0, 0.6, n_raters))
        raters = np.argsort(rng.random((n_answers, n_raters)), axis=1)[:, :per_answer]
        x = (rng.random(raters.shape) < q[raters]).mean(axis=1)
        margin = seq.rater_margin(answers, raters.ravel(), x, 0.1)[-1]
        hits += abs(q.mean() - population) <= margin
    assert 0.82 <= hits / 120 <= 0.98, hits
