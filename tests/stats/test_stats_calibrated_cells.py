"""Many calibrated cells sharing one two-way draw: each cell's estimate and
interval against the one-cell functions, and nested cells against their
leaves added up."""

import copy

import numpy as np
import pytest

from clinieval.stats import calibrated
from clinieval.stats.calibrated import (
    CalibratedMean,
    CellMeasure,
    NoEstimate,
    calibrated_answer_mean,
    calibrated_cells,
    calibrated_measures,
    calibrated_rating_mean,
    crossed_draw,
)
from tests.stats.test_stats_calibrated import crossed as crossed_design


def crossed(seed):
    """The crossed design of the single-cell tests, larger."""
    return crossed_design(seed, A=2000, n=240)


@pytest.mark.parametrize("inclusion", [False, True])
def test_one_cell_with_its_own_draw_is_the_one_cell_function(inclusion):
    # The same draws in the same order: the replicates, hence the intervals,
    # are the one-cell function's (to the rounding of the shared path's float32
    # products of non-integer weights; its sums accumulate in float64).
    prediction, answer, rater, score = crossed(1)
    pi = np.random.default_rng(9).uniform(0.05, 0.3, prediction.size) if inclusion else None
    one = calibrated_rating_mean(prediction, answer, rater, score, inclusion=pi,
                                 rng=np.random.default_rng(4), B=300)
    rng = np.random.default_rng(4)
    draw = crossed_draw(answer, rater, 300, rng)
    [many] = calibrated_cells(prediction, answer, rater, score, leaf=np.zeros(prediction.size),
                              cells=[[0]], draw=draw, rng=rng, inclusion=pi)
    assert isinstance(many, CalibratedMean)
    for ours, theirs in zip(many, one, strict=True):
        assert ours == pytest.approx(theirs, rel=1e-9 if pi is None else 1e-6, abs=1e-12)


def test_a_cell_of_several_leaves_is_the_cell_of_one_leaf():
    prediction, answer, rater, score = crossed(2)
    A = prediction.size
    fail = (score <= -1).astype(float)
    rated = np.bincount(answer, minlength=A) > 0
    flag = np.where(rated, np.bincount(answer, weights=fail, minlength=A) >= 2, np.nan)
    split = np.arange(A) % 5  # five leaves
    for kwargs in ({"rating_value": score}, {"answer_value": flag.astype(float)}):
        draw = crossed_draw(answer, rater, 200, np.random.default_rng(0))
        whole = calibrated_cells(prediction, answer, rater, leaf=np.zeros(A), cells=[[0]],
                                 draw=draw, rng=np.random.default_rng(1), **kwargs)[0]
        parts = calibrated_cells(prediction, answer, rater, leaf=split,
                                 cells=[[0, 1, 2, 3, 4], [3]], draw=draw,
                                 rng=np.random.default_rng(1), **kwargs)
        # (float32 within a block: the answer flag's 1/3 weights round differently
        # when the sums are grouped otherwise)
        for ours, theirs in zip(parts[0], whole, strict=True):
            assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-12)
        # a leaf alone: its point estimate is the one-cell function's on its answers
        mine = split == 3
        single = (calibrated_rating_mean if "rating_value" in kwargs else calibrated_answer_mean)(
            np.where(mine, prediction, np.nan), answer, rater, rng=np.random.default_rng(3),
            B=50, **kwargs)
        assert parts[1].estimate == pytest.approx(single.estimate, abs=1e-12)
        assert parts[1].clinicians == pytest.approx(single.clinicians, abs=1e-12)
        assert parts[1].lower < parts[1].estimate < parts[1].upper


@pytest.mark.parametrize("named", [False, True])
def test_cells_without_estimate_say_why_and_others_still_come(named):
    prediction, answer, rater, score = crossed(3)
    if named:  # raters by name: their counts are found by a sort, not a table of codes
        rater = np.char.add("clinician-", rater.astype(str))
    A = prediction.size
    leaf = np.where(np.arange(A) < 20, 1, 0)  # leaf 1: a handful of answers
    draw = crossed_draw(answer, rater, 100, np.random.default_rng(0))
    out = calibrated_cells(prediction, answer, rater, score, leaf=leaf, cells=[[1], [0], [7]],
                           draw=draw, rng=np.random.default_rng(1))
    assert isinstance(out[0], NoEstimate) and out[0].reason in ("too_few_labelled", "no_overlap")
    # with the counts the one-cell function gives on the leaf's answers alone
    mine = np.flatnonzero(leaf == 1)
    of = np.isin(answer, mine)
    alone = calibrated_rating_mean(prediction[mine], np.searchsorted(mine, answer[of]),
                                   rater[of], score[of], rng=np.random.default_rng(1), B=10)
    assert out[0] == alone
    assert isinstance(out[1], CalibratedMean)
    assert isinstance(out[2], NoEstimate) and out[2].reason == "all_unparsed"


def test_a_draw_that_misses_the_cells_ratings_is_refused():
    prediction, answer, rater, score = crossed(4)
    half = answer < answer.max() // 2
    draw = crossed_draw(answer[half], rater[half], 50, np.random.default_rng(0))
    with pytest.raises(ValueError, match="draw does not cover"):
        calibrated_cells(prediction, answer, rater, score, leaf=np.zeros(prediction.size),
                         cells=[[0]], draw=draw, rng=np.random.default_rng(1))


@pytest.fixture
def passes(monkeypatch) -> list[int]:
    """The number of measures of each pass over the labelled answers."""
    seen: list[int] = []
    real = calibrated._group_sums
    monkeypatch.setattr(calibrated, "_group_sums",
                        lambda *a: seen.append(len(a[2])) or real(*a))
    return seen


@pytest.mark.parametrize("inclusion", [False, True])
def test_measures_found_together_are_each_one_cell_function(inclusion, passes):
    # A criterion's mean score, Fail % and answers failing %, and an
    # any-criterion flag over two criteria's ratings (each clinician's rating
    # twice), label the same answers with the same raters: their replicate
    # sums come from one pass (the per-answer ones scaled from the per-rating
    # totals). Each must still be its one-cell function: the same rater and
    # answer draws, and its own generator for the unlabelled resample.
    prediction, answer, rater, score = crossed(5)
    A = prediction.size
    fail = (score <= -1) * 1.0
    rated = np.bincount(answer, minlength=A) > 0
    flag = np.where(rated, np.bincount(answer, weights=fail, minlength=A) >= 2, np.nan) * 1.0
    other = np.where(rated, np.bincount(answer, weights=fail, minlength=A) >= 1, np.nan) * 1.0
    judge_fail = (prediction <= -1) * 1.0
    pi = np.random.default_rng(9).uniform(0.05, 0.3, A) if inclusion else None
    twice = (np.concatenate([answer, answer]), np.concatenate([rater, rater]))
    cases = [(prediction, answer, rater, score, None, calibrated_rating_mean),
             (judge_fail, answer, rater, fail, None, calibrated_rating_mean),
             (judge_fail, answer, rater, None, flag, calibrated_answer_mean),
             (judge_fail, *twice, None, other, calibrated_answer_mean)]
    rng = np.random.default_rng(4)
    draw = crossed_draw(answer, rater, 300, rng)
    found = calibrated_measures(
        [CellMeasure(f, a, r, y, g, np.zeros(A), [[0]], copy.deepcopy(rng), pi)
         for f, a, r, y, g, _ in cases], draw=draw)
    assert passes == [4]  # one pass for all four
    for (f, a, r, y, g, alone), [ours] in zip(cases, found, strict=True):
        kwargs = {"rating_value": y} if g is None else {"answer_value": g}
        if g is None:
            theirs = alone(f, a, r, y, inclusion=pi, rng=np.random.default_rng(4), B=300)
        else:
            theirs = alone(f, a, r, answer_value=g, inclusion=pi,
                           rng=np.random.default_rng(4), B=300)
        assert isinstance(ours, CalibratedMean), kwargs
        for x, z in zip(ours, theirs, strict=True):
            assert x == pytest.approx(z, rel=1e-6, abs=1e-12)


def test_measures_of_other_answers_get_their_own_pass(passes):
    prediction, answer, rater, score = crossed(6)
    A = prediction.size
    half = answer % 2 == 0  # another measure's ratings: half the answers
    rng = np.random.default_rng(1)
    draw = crossed_draw(answer, rater, 100, rng)
    # and a per-answer measure on the same answers and raters whose first
    # rating of each answer counts twice: its raters weigh 2/4, 1/4, 1/4 of
    # the answer, not in proportion to the first measure's ratings
    first = np.flatnonzero(np.r_[True, answer[1:] != answer[:-1]])
    extra = (np.concatenate([answer, answer[first]]), np.concatenate([rater, rater[first]]))
    flag = np.where(np.bincount(answer, minlength=A) > 0, prediction > 0, np.nan) * 1.0
    together = calibrated_measures(
        [CellMeasure(prediction, answer, rater, score, None, np.zeros(A), [[0]],
                     copy.deepcopy(rng)),
         CellMeasure(prediction, answer[half], rater[half], score[half], None, np.zeros(A),
                     [[0]], copy.deepcopy(rng)),
         CellMeasure(prediction, *extra, None, flag, np.zeros(A), [[0]], copy.deepcopy(rng))],
        draw=draw)
    assert passes == [1, 1, 1]
    alone = calibrated_cells(prediction, answer[half], rater[half], score[half],
                             leaf=np.zeros(A), cells=[[0]], draw=draw, rng=copy.deepcopy(rng))
    assert together[1] == alone
    alone = calibrated_cells(prediction, *extra, answer_value=flag, leaf=np.zeros(A),
                             cells=[[0]], draw=draw, rng=copy.deepcopy(rng))
    assert together[2] == alone
