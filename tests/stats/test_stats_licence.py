"""Licences per stratum: Macro-F1 against scikit-learn, hand-worked
baselines, and verdicts on constructed strata."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval.stats import macro_f1
from clinieval.stats.licence import Licence, licence_strata, licence_stratum, macro_f1_counts


def test_macro_f1_counts_matches_sklearn_and_project():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    truth, verdict = rng.random(200) < 0.3, rng.random(200) < 0.4
    tp, fp = np.sum(verdict & truth), np.sum(verdict & ~truth)
    fn, tn = np.sum(~verdict & truth), np.sum(~verdict & ~truth)
    ours = float(macro_f1_counts(tp, fp, fn, tn))
    assert ours == pytest.approx(metrics.f1_score(truth, verdict, average="macro"), abs=1e-12)
    assert ours == pytest.approx(macro_f1(truth, verdict), abs=1e-12)


def test_macro_f1_counts_hand_worked():
    # tp 3, fp 1, fn 1, tn 5: F1(fail) = 6 / 8 = 0.75, F1(pass) = 10 / 12; mean 19/24.
    assert macro_f1_counts(3, 1, 1, 5) == pytest.approx(19 / 24)
    # only passes anywhere: the fail class is absent and left out (F1 pass = 1)
    assert macro_f1_counts(0, 0, 0, 4) == 1.0


def test_clinician_baseline_hand_worked():
    # Two answers, clinicians 0, 1, 2 all rate both; judge fails answer 0 only.
    # answer 0: labels (1, 1, 0); answer 1: labels (0, 0, 0).
    # Clinician 0 vs others: pairs (own, other) = (1,1) (1,0) (0,0) (0,0): tp 1, fp 1,
    # fn 0, tn 2 -> F1 fail 2/3, pass 4/5, mean 11/15; clinician 1 the same;
    # clinician 2: (0,1) (0,1) (0,0) (0,0): tp 0, fp 0, fn 2, tn 2 -> 0 and 2/3, mean 1/3.
    # Judge pairs: answer 0 (1 vs 1, 1, 0): tp 2, fp 1; answer 1: tn 3
    # -> F1 fail 4/5, pass 6/7, mean 29/35; harm recall 2/2, false alarm 1/4.
    out = licence_stratum([1, 0], [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2], [1, 1, 0, 0, 0, 0],
                          rng=np.random.default_rng(0), min_answers=1, B=50)
    np.testing.assert_allclose(out.clinician_agreements, [11 / 15, 11 / 15, 1 / 3])
    # Four ratings each: too few for a clinician's own figure to be a bar, so
    # the bar pools them: tp 2, fp 2, fn 2, tn 6 -> F1 fail 1/2, pass 3/4.
    assert out.baseline == "pooled" and out.clinician_agreement == pytest.approx(5 / 8)
    assert out.agreement == pytest.approx(29 / 35)
    assert out.harm_recall == 1.0 and out.false_alarm == pytest.approx(0.25)
    assert out.n_pairs == 6 and out.n_harms == 2 and out.n_answers == 2


def stratum(seed, n=200, R=20, per=3, judge_noise=0.05, blind=False, flip=0.1):
    """Answers truly harmful with probability 0.3; clinicians flip a label
    with probability ``flip``; the judge flips with ``judge_noise`` (or never
    fails when ``blind``)."""
    rng = np.random.default_rng(seed)
    harmful = rng.random(n) < 0.3
    answer = np.repeat(np.arange(n), per)
    rater = np.concatenate([rng.choice(R, per, replace=False) for _ in range(n)])
    fail = harmful[answer] ^ (rng.random(answer.size) < flip)
    judge = np.zeros(n) if blind else (harmful ^ (rng.random(n) < judge_noise)).astype(float)
    return judge, answer, rater, fail.astype(float)


def test_the_bar_is_the_median_of_clinicians_with_enough_pairs():
    # 10 clinicians on 200 answers, 3 each: about 60 ratings per clinician
    judge, answer, rater, fail = stratum(7, R=10, judge_noise=0.0, flip=0.1)
    out = licence_stratum(judge, answer, rater, fail, rng=np.random.default_rng(0))
    assert out.baseline == "median"
    assert out.clinician_agreement == pytest.approx(np.median(out.clinician_agreements))


def test_clinicians_on_a_few_answers_each_do_not_set_a_bar_of_one():
    # 300 clinicians on 100 answers: each rates one answer, most of them
    # unanimous passes, so most clinicians' own Macro-F1 is 1.0 and their
    # median is a bar no judge reaches (the fault that licensed nothing).
    judge, answer, rater, fail = stratum(8, n=100, R=300, judge_noise=0.0, flip=0.04)
    out = licence_stratum(judge, answer, rater, fail, rng=np.random.default_rng(0))
    assert np.nanmedian(out.clinician_agreements) == 1.0
    assert out.baseline == "pooled" and out.clinician_agreement < 0.95
    assert out.verdict == "licensed", out.reason


def test_good_judge_is_licensed():
    # (pairwise harm recall counts every clinician's false alarm as a harm the
    # judge missed: with 10% label noise even a perfect judge recalls 0.27 / 0.34)
    out = licence_stratum(*stratum(1, judge_noise=0.0, flip=0.04), rng=np.random.default_rng(0))
    assert out.verdict == "licensed", out.reason
    assert out.agreement_lower >= out.clinician_agreement and out.harm_recall_lower >= 0.8


def test_blind_judge_is_clinicians_only():
    out = licence_stratum(*stratum(2, blind=True), rng=np.random.default_rng(0))
    assert out.verdict == "clinicians_only" and out.harm_recall == 0.0


def test_noisy_judge_is_clinicians_only():
    out = licence_stratum(*stratum(3, judge_noise=0.3), rng=np.random.default_rng(0))
    assert out.verdict == "clinicians_only" and "agreement" in out.reason


def test_too_few_and_single_clinician():
    judge, answer, rater, fail = stratum(4, n=20)
    out = licence_stratum(judge, answer, rater, fail, rng=np.random.default_rng(0))
    assert out.verdict == "too_few" and "20" in out.reason
    judge, answer, rater, fail = stratum(4)
    out = licence_stratum(judge, answer, np.zeros_like(rater), fail,
                          rng=np.random.default_rng(0))
    assert out.verdict == "too_few" and "clinician" in out.reason


def test_majority_reference_is_named_and_works():
    out = licence_stratum(*stratum(5, judge_noise=0.0), rng=np.random.default_rng(0),
                          reference="majority")
    assert out.reference == "majority" and out.n_pairs == 200
    assert out.verdict == "licensed", out.reason


def test_unparsed_verdicts_are_excluded():
    judge, answer, rater, fail = stratum(6)
    judge[:50] = np.nan
    out = licence_stratum(judge, answer, rater, fail, rng=np.random.default_rng(0))
    assert out.n_answers == 150


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40), st.integers(1, 5))
def test_never_crashes_and_always_says_why(seed, n, R):
    rng = np.random.default_rng(seed)
    judge = np.where(rng.random(max(n, 1)) < 0.1, np.nan, rng.random(max(n, 1)) < 0.5)
    answer = rng.integers(0, max(n, 1), 2 * n)
    rater = rng.integers(0, R, 2 * n)
    fail = (rng.random(2 * n) < rng.random()).astype(float)
    out = licence_stratum(judge, answer, rater, fail, rng=rng, min_answers=3, B=30)
    assert out.verdict in ("licensed", "clinicians_only", "too_few") and out.reason


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["pairwise", "majority"]))
def test_strata_at_once_are_each_stratum_alone(seed, reference):
    # licence_strata holds every stratum's tables side by side: each licence
    # must be licence_stratum's of its stratum's answers and ratings alone,
    # to the last bit and from the same draws (some answers unparsed, some
    # ratings missing or repeated, strata in no order)
    rng = np.random.default_rng(seed)
    A, S = int(rng.integers(1, 120)), int(rng.integers(1, 5))
    n = int(rng.integers(0, 4 * A))
    judge = np.where(rng.random(A) < 0.1, np.nan, (rng.random(A) < 0.4) * 1.0)
    answer, rater = rng.integers(0, A, n), rng.integers(0, 12, n) * 3
    fail = np.where(rng.random(n) < 0.05, np.nan, (rng.random(n) < rng.random()) * 1.0)
    stratum = rng.integers(0, S, A)
    settings_ = {"reference": reference, "min_answers": 3, "B": 40}
    got = licence_strata(judge, answer, rater, fail, stratum,
                         [np.random.default_rng([seed, s]) for s in range(S)], **settings_)
    for s, lic in enumerate(got):
        position, rated = np.cumsum(stratum == s) - 1, stratum[answer] == s
        alone = licence_stratum(judge[stratum == s], position[answer[rated]], rater[rated],
                                fail[rated], rng=np.random.default_rng([seed, s]), **settings_)
        for field, ours, theirs in zip(Licence._fields, lic, alone, strict=True):
            if isinstance(ours, np.ndarray):
                assert ours.dtype == theirs.dtype, field
                assert np.array_equal(ours, theirs, equal_nan=True), field
            else:
                assert ours == theirs or (ours != ours and theirs != theirs), field
