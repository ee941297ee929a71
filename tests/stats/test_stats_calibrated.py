"""Judge-calibrated means (PPI++ under a crossed design): against ppi_py,
hand-worked cases, the reasons for no estimate, and properties."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval.stats.calibrated import (
    CalibratedMean,
    NoEstimate,
    calibrated_answer_mean,
    calibrated_rating_mean,
    ppi_mean,
)


def independent(seed, n=150, N=1200, rho=0.7):
    """Labelled (y, f) and unlabelled f, one independent unit each."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n + N)
    f = rho * truth + np.sqrt(1 - rho**2) * rng.normal(size=n + N)
    y = truth[:n] + 0.3 * rng.normal(size=n)
    return y, f[:n], f[n:]


@pytest.mark.parametrize("seed", range(5))
def test_matches_ppi_py_with_power_tuning(seed):
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = independent(seed)
    ours = ppi_mean(y, f, fu, level=0.9)
    point = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=None)
    lower, upper = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1, lam=None)
    assert ours.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-9)
    assert (ours.lower, ours.upper) == pytest.approx(
        (float(np.squeeze(lower)), float(np.squeeze(upper))), abs=1e-9)


def test_crossed_estimator_on_independent_ratings_matches_ppi_py():
    # One rating per labelled answer, each by its own clinician: no clustering.
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = independent(7)
    n = y.size
    prediction = np.concatenate([f, fu])
    out = calibrated_rating_mean(prediction, np.arange(n), np.arange(n), y,
                                 rng=np.random.default_rng(0), B=200)
    lower, upper = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=None)
    assert out.estimate == pytest.approx(
        float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, fu))), abs=1e-9)
    assert (out.iid_lower, out.iid_upper) == pytest.approx(
        (float(np.squeeze(lower)), float(np.squeeze(upper))), abs=1e-9)


def test_weighted_point_matches_ppi_py_at_fixed_lambda():
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = independent(3)
    rng = np.random.default_rng(3)
    w, wu = rng.uniform(0.5, 3, y.size), rng.uniform(0.5, 2, fu.size)
    ours = ppi_mean(y, f, fu, lam=0.6, weights=w, weights_unlabelled=wu)
    theirs = ppi_py.ppi_mean_pointestimate(y, f, fu, lam=0.6, w=w, w_unlabeled=wu)
    assert ours.estimate == pytest.approx(float(np.squeeze(theirs)), abs=1e-9)


def test_hand_worked_case():
    # y = [2, 0, 1, 1], f = [2, 0, 2, 0] labelled; f = [2, 2] unlabelled.
    # mean y = 1, mean f_L = 1, cov_n(y, f) = (1*1 + (-1)(-1) + 0 + 0) / 4 = 1/2.
    # pooled f = [2, 0, 2, 0, 2, 2]: mean 4/3, sum of squares 4(2/3)^2 + 2(4/3)^2 = 16/3,
    # var (ddof 1) = 16/15. lam = (1/2) / ((1 + 4/2) * 16/15) = 5/32.
    # theta = 5/32 * 2 + 1 - 5/32 * 1 = 37/32.
    # se: unlabelled f constant (0); y - lam f = [1.6875, 0, 0.6875, 1], mean 0.84375,
    # var0 = (2 * 0.84375^2 + 2 * 0.15625^2) / 4 = 0.3681640625, se = sqrt(var0 / 4).
    out = ppi_mean([2, 0, 1, 1], [2, 0, 2, 0], [2, 2])
    assert out.lam == pytest.approx(5 / 32, abs=1e-12)
    assert out.estimate == pytest.approx(37 / 32, abs=1e-12)
    assert out.se == pytest.approx(np.sqrt(0.3681640625 / 4), abs=1e-12)


def test_lambda_zero_is_clinicians_alone_and_lambda_one_is_ppi():
    # lam = 0: mean(y) = 1; lam = 1: mean(fu) + mean(y - f) = 2 + 0 = 2.
    assert ppi_mean([2, 0, 1, 1], [2, 0, 2, 0], [2, 2], lam=0).estimate == 1.0
    assert ppi_mean([2, 0, 1, 1], [2, 0, 2, 0], [2, 2], lam=1).estimate == 2.0


def test_useless_judge_gets_lambda_near_zero():
    rng = np.random.default_rng(11)
    y, f, fu = rng.normal(size=3000), rng.normal(size=3000), rng.normal(size=20000)
    assert ppi_mean(y, f, fu).lam < 0.05


def crossed(seed, A=1500, n=150, R=30, per=3, judge_sd=0.6, rater_sd=0.4):
    """A crossed design: answer and rater effects on a -2..2 scale."""
    rng = np.random.default_rng(seed)
    effect, leniency = rng.normal(0, 0.8, A), rng.normal(0, rater_sd, R)
    prediction = np.clip(np.round(0.5 + effect + rng.normal(0, judge_sd, A)), -2, 2)
    labelled = rng.choice(A, n, replace=False)
    answer = np.repeat(labelled, per)
    rater = np.concatenate([rng.choice(R, per, replace=False) for _ in labelled])
    score = np.clip(np.round(0.5 + effect[answer] + leniency[rater]
                             + rng.normal(0, 0.7, answer.size)), -2, 2)
    return prediction, answer, rater, score


def test_uniform_inclusion_probabilities_reduce_to_ppi():
    prediction, answer, rater, score = crossed(1)
    plain = calibrated_rating_mean(prediction, answer, rater, score,
                                   rng=np.random.default_rng(5), B=300)
    uniform = calibrated_rating_mean(prediction, answer, rater, score,
                                     inclusion=np.full(prediction.size, 0.1),
                                     rng=np.random.default_rng(5), B=300)
    for ours, same in zip(plain, uniform, strict=True):
        assert ours == pytest.approx(same, rel=1e-12, abs=1e-12)


def test_crossed_result_is_consistent_and_reproducible():
    prediction, answer, rater, score = crossed(2)
    run = [calibrated_rating_mean(prediction, answer, rater, score,
                                  rng=np.random.default_rng(9), B=400) for _ in range(2)]
    out = run[0]
    assert isinstance(out, CalibratedMean) and run[0] == run[1]
    assert out.lower < out.estimate < out.upper
    assert out.clinicians_lower < out.clinicians < out.clinicians_upper
    assert 0 < out.lam <= 1 and out.rho > 0.5
    assert out.n_labelled == 150 and out.n_ratings == 450 and out.n_unlabelled == 1350
    assert out.effective_n == pytest.approx(150 * out.gain)
    # rater leniency is shared across answers: the two-way interval is wider than the iid one
    assert out.upper - out.lower > out.iid_upper - out.iid_lower


def test_answer_mean_equals_rating_mean_with_equal_raters_per_answer():
    prediction, answer, rater, score = crossed(3)
    by_rating = calibrated_rating_mean(prediction, answer, rater, score,
                                       rng=np.random.default_rng(1), B=100)
    by_answer = calibrated_answer_mean(prediction, answer, rater, score,
                                       rng=np.random.default_rng(1), B=100)
    assert by_answer.estimate == pytest.approx(by_rating.estimate, abs=1e-12)
    assert by_answer.lower == pytest.approx(by_rating.lower, abs=1e-12)


def test_answer_flag_under_a_rule():
    prediction, answer, rater, score = crossed(4)
    flag = np.full(prediction.size, np.nan)
    sums = np.bincount(answer, weights=score <= -1, minlength=prediction.size)
    rated = np.bincount(answer, minlength=prediction.size) > 0
    flag[rated] = (sums[rated] >= 2).astype(float)  # a majority of its 3 clinicians fail it
    out = calibrated_answer_mean((prediction <= -1).astype(float), answer, rater,
                                 answer_value=flag, rng=np.random.default_rng(2), B=300,
                                 bounds=(0, 1))
    assert isinstance(out, CalibratedMean)
    assert 0 <= out.lower <= out.estimate <= out.upper <= 1


def reason(out):
    assert isinstance(out, NoEstimate)
    return out.reason


def test_reasons_for_no_estimate():
    prediction, answer, rater, score = crossed(5)
    rng = np.random.default_rng(0)
    nan = np.full(prediction.size, np.nan)
    assert reason(calibrated_rating_mean(nan, answer, rater, score, rng=rng)) == "all_unparsed"
    unrated = prediction.copy()
    unrated[answer] = np.nan
    out = calibrated_rating_mean(unrated, answer, rater, score, rng=rng)
    assert reason(out) == "no_overlap" and out.n_unparsed == 150
    few = answer < np.sort(np.unique(answer))[10]
    assert reason(calibrated_rating_mean(prediction, answer[few], rater[few], score[few],
                                         rng=rng)) == "too_few_labelled"
    assert reason(calibrated_rating_mean(np.zeros(prediction.size), answer, rater, score,
                                         rng=rng)) == "constant_judge"
    assert reason(calibrated_rating_mean(prediction, answer, rater, np.ones_like(score),
                                         rng=rng)) == "constant_clinicians"
    assert reason(calibrated_rating_mean(prediction, answer, np.zeros_like(rater), score,
                                         rng=rng)) == "single_clinician"
    only = np.unique(answer)
    recoded = np.searchsorted(only, answer)
    assert reason(calibrated_rating_mean(prediction[only], recoded, rater, score,
                                         rng=rng)) == "no_unlabelled"


def test_unparsed_judgments_are_excluded_and_counted():
    prediction, answer, rater, score = crossed(6)
    lost = prediction.copy()
    lost[answer[:30]] = np.nan  # 10 labelled answers (3 ratings each)
    lost[np.setdiff1d(np.arange(lost.size), answer)[:5]] = np.nan
    out = calibrated_rating_mean(lost, answer, rater, score, rng=np.random.default_rng(0),
                                 B=100)
    assert out.n_unparsed == 15 and out.n_labelled == 140 and out.n_unlabelled == 1345


def test_bad_input_raises():
    with pytest.raises(ValueError):
        calibrated_rating_mean(np.zeros(3), [0, 5], [0, 1], [1, 1],
                               rng=np.random.default_rng(0))
    with pytest.raises(ValueError):
        calibrated_answer_mean(np.zeros(3), [0], [0], rng=np.random.default_rng(0))


small = st.integers(0, 2**32 - 1).map(np.random.default_rng)


@settings(max_examples=40, deadline=None)
@given(small, st.integers(1, 60), st.integers(1, 6), st.integers(0, 3))
def test_fail_share_stays_in_range_or_says_why(rng, n_labelled, n_raters, judge_levels):
    A = n_labelled + int(rng.integers(0, 40))
    prediction = rng.integers(0, judge_levels + 1, A) / max(judge_levels, 1)
    prediction[rng.random(A) < 0.1] = np.nan
    answer = np.repeat(np.arange(n_labelled), 2)
    rater = rng.integers(0, n_raters, answer.size)
    fail = (rng.random(answer.size) < rng.random()).astype(float)
    out = calibrated_rating_mean(prediction, answer, rater, fail, rng=rng, B=50,
                                 min_labelled=5, bounds=(0, 1))
    if isinstance(out, NoEstimate):
        assert out.message
        return
    for value in (out.estimate, out.lower, out.upper, out.iid_lower, out.iid_upper):
        assert 0 <= value <= 1
    assert 0 <= out.lam <= 1


def selected_for_judge_fails():
    """Clinicians rate answers the judge fails 6x as often (pi 0.12 against
    0.02), two ratings each: (judge, pi, labelled, answer, rater, fail, truth)."""
    rng = np.random.default_rng(8)
    A, R = 20000, 40
    harm = rng.random(A) < 0.2
    judge = (harm ^ (rng.random(A) < 0.15)).astype(float)
    pi = np.where(judge == 1, 0.12, 0.02)
    labelled = np.flatnonzero(rng.random(A) < pi)
    answer = np.repeat(labelled, 2)
    rater = rng.integers(0, R, answer.size)
    fail = (harm[answer] ^ (rng.random(answer.size) < 0.05)).astype(float)
    truth = 0.2 * 0.95 + 0.8 * 0.05
    return judge, pi, labelled, answer, rater, fail, truth


def test_recorded_probabilities_remove_the_selection_bias():
    # Clinicians rate answers the judge fails 6x as often: unweighted, the
    # labelled mean over-represents failures; weighted by 1/pi it does not.
    judge, pi, labelled, answer, rater, fail, truth = selected_for_judge_fails()
    kw = dict(rng=np.random.default_rng(0), B=200, bounds=(0, 1))
    weighted = calibrated_rating_mean(judge, answer, rater, fail, inclusion=pi, **kw)
    naive = calibrated_rating_mean(judge, answer, rater, fail, **kw)
    assert weighted.lower <= truth <= weighted.upper
    assert weighted.clinicians_lower <= truth <= weighted.clinicians_upper
    assert naive.clinicians - truth > 0.2  # the selection bias the weights remove


def test_unknown_probabilities_of_the_unrated_take_the_judges_mean_over_every_answer():
    """A targeted study records a probability only for the answers it handed
    out (NaN for the rest): the estimate is then, at its tuned lam,
    lam * mean(f over every answer) + the 1/pi-weighted mean of y - lam f
    over the ratings, worked out here by hand; and it removes the selection
    bias as the known-probability form does."""
    judge, pi, labelled, answer, rater, fail, truth = selected_for_judge_fails()
    A = judge.size
    recorded = np.full(A, np.nan)
    recorded[labelled] = pi[labelled]
    out = calibrated_rating_mean(judge, answer, rater, fail, inclusion=recorded,
                                 rng=np.random.default_rng(0), B=200)
    w = 1 / pi[answer]
    by_hand = out.lam * judge.mean() + (w * (fail - out.lam * judge[answer])).sum() / w.sum()
    assert out.estimate == pytest.approx(by_hand, abs=1e-12)
    assert out.clinicians == pytest.approx((w * fail).sum() / w.sum(), abs=1e-12)
    assert 0 < out.lam <= 1 and out.lower <= truth <= out.upper
    with pytest.raises(ValueError, match="rated answers"):
        calibrated_rating_mean(judge, answer, rater, fail, inclusion=np.where(
            np.isin(np.arange(A), labelled), np.nan, 0.1), rng=np.random.default_rng(0), B=20)


def _straightforward_replicates(p, B, rng):
    """The bootstrap of the tuned estimator written out replicate by
    replicate: each rating weighs U[rater] V[answer] times its own weight,
    each unlabelled answer its count, and the PPI++ formulas are applied to
    the weighted data (the same draws as the fast path, in the same order)."""
    from clinieval.stats.bootstrap import resample_counts
    from clinieval.stats.calibrated import _distinct_pairs
    from clinieval.stats.crossed.pigeonhole import pigeonhole_weights

    n, R = p.f.size, int(p.rater.max()) + 1
    U, V = pigeonhole_weights(R, n, B, rng)
    (u, fu), freq = _distinct_pairs(p.u, p.fu)
    counts = resample_counts(freq, B, rng)
    out = []
    for b in range(B):
        w = p.weight * U[b, p.rater]  # rater weights inside each answer's totals
        a = np.bincount(p.answer, weights=w * p.value, minlength=n)
        d = np.bincount(p.answer, weights=w, minlength=n)
        m = V[b]
        D = float(m @ d)
        ybar, fbar = float(m @ a) / D, float(m @ (d * p.f)) / D
        cov = float(np.sum(m * d * (a / np.where(d > 0, d, 1) - ybar) * d * (p.f - fbar))) / D**2
        lw, uw = m * p.v, counts[b] * u
        total = lw.sum() + uw.sum()
        mean_f = (lw @ p.f + uw @ fu) / total
        var_f = (lw @ (p.f - mean_f) ** 2 + uw @ (fu - mean_f) ** 2) / (total - 1)
        scale = var_f * (float(m @ d**2) / D**2 + float(counts[b] @ u**2) / float(uw.sum()) ** 2)
        lam = float(np.clip(cov / scale, 0, 1)) if scale > 0 else 0.0
        mu = float(uw @ fu) / float(uw.sum())
        out.append(lam * mu + ybar - lam * fbar)
    return np.array(out)


@pytest.mark.parametrize("seed", [3, 4])
def test_fast_bootstrap_equals_the_straightforward_one(seed):
    from clinieval.stats.calibrated import _bootstrap, _prepare

    prediction, answer, rater, score = crossed(seed)
    inclusion = np.random.default_rng(seed).uniform(0.05, 0.5, prediction.size)
    for kind, kwargs in (("rating", {"inclusion": None}), ("rating", {"inclusion": inclusion})):
        p, _ = _prepare(prediction, answer, rater, score, None, kwargs["inclusion"], kind, 30)
        fast, _ = _bootstrap(p, 60, np.random.default_rng(seed))
        slow = _straightforward_replicates(p, 60, np.random.default_rng(seed))
        np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-12)


def test_a_share_interval_is_formed_on_the_logit_scale():
    """Hand-worked: the normal interval [0.087, 0.165] (centre 0.126, half
    0.039) becomes logit(0.126) +- 0.039 / (0.126 * 0.874) mapped back."""
    from scipy.special import expit, logit

    from clinieval.stats.calibrated import _logit_interval

    lower, upper = _logit_interval(0.087, 0.165)
    spread = 0.039 / (0.126 * 0.874)
    assert lower == pytest.approx(expit(logit(0.126) - spread), abs=1e-12)
    assert upper == pytest.approx(expit(logit(0.126) + spread), abs=1e-12)
    assert (lower, upper) == pytest.approx((0.09188, 0.17042), abs=5e-5)
    assert upper - 0.126 > 0.126 - lower  # it leans up, away from 0
    assert _logit_interval(-0.05, 0.03) == (-0.05, 0.03)  # centre outside (0, 1): unchanged


def test_a_flags_two_way_variance_is_corrected_for_centring():
    """Planted crossed design (800 answers, 60 clinicians, three each: 40
    answers per clinician), a dangerous-answer flag (two of three fail):
    over 3,000 snapshots the two-way variance of its mean averages the
    variance the estimates actually have, or a little more (1.03 here,
    1.07-1.13 on three other seeds; the sampling error of that variance is
    about 2.6%). Without the centring correction it averages 0.91 of it
    here (with the one-way G/(G-1) factors), which left the 95% intervals
    at 92% coverage."""
    from clinieval.stats.calibrated import _prepare, _variances

    n, R, k, extra = 800, 60, 3, 100
    rng = np.random.default_rng(20261203)
    estimates, variances = [], []
    for _ in range(3000):
        effect, leniency = rng.normal(0, 0.8, n), rng.normal(0, 0.4, R)
        rater = rng.permuted(np.tile(np.arange(R), (n, 1)), axis=1)[:, :k].ravel()
        answer = np.repeat(np.arange(n), k)
        score = np.clip(np.round(0.8 + effect[answer] + leniency[rater]
                                 + rng.normal(0, 0.7, answer.size)), -2, 2)
        flag = (np.bincount(answer, weights=score <= -1, minlength=n) >= 2).astype(float)
        judge = np.append(rng.random(n), np.ones(extra))
        pieces, _ = _prepare(judge, answer, rater, None, np.append(flag, np.full(extra, np.nan)),
                             None, "answer", 30)
        estimates.append(flag.mean())
        variances.append(_variances(pieces, 0.0, flag.mean())[0])  # clinicians alone
    ratio = np.mean(variances) / np.var(estimates, ddof=1)
    assert 0.97 < ratio < 1.12


def test_a_clinician_rating_an_answer_twice_counts_once_in_a_flags_variance():
    """A per-answer flag depends on who rated the answer, not how often: a
    second rating of an answer by the same clinician leaves the two-way
    variance as it was (it doubled that clinician's share before)."""
    from clinieval.stats.calibrated import _prepare, _variances

    rng = np.random.default_rng(4)
    n, R = 120, 12
    answer = np.repeat(np.arange(n), 2)
    rater = np.concatenate([rng.choice(R, 2, replace=False) for _ in range(n)])
    harsh = rng.random(R) < 0.3  # a harsh clinician's answers are flagged: rater variance
    flag = (harsh[rater.reshape(n, 2)].any(axis=1) | (rng.random(n) < 0.1)).astype(float)
    judge = np.append(rng.random(n), np.ones(20))
    value = np.append(flag, np.full(20, np.nan))
    twice = rng.choice(n, 30, replace=False)  # 30 answers get their first rater again
    dup_answer = np.concatenate([answer, twice])
    dup_rater = np.concatenate([rater, rater[2 * twice]])
    once, _ = _prepare(judge, answer, rater, None, value, None, "answer", 30)
    again, _ = _prepare(judge, dup_answer, dup_rater, None, value, None, "answer", 30)
    theta = flag.mean()
    assert _variances(again, 0.0, theta)[0] == pytest.approx(_variances(once, 0.0, theta)[0],
                                                             rel=1e-12)
