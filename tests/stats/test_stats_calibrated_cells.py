"""Many calibrated cells sharing one two-way draw: each cell's estimate and
interval against the one-cell functions, and nested cells against their
leaves added up."""

import numpy as np
import pytest

from clinieval.stats.calibrated import (
    CalibratedMean,
    NoEstimate,
    calibrated_answer_mean,
    calibrated_cells,
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


def test_cells_without_estimate_say_why_and_others_still_come():
    prediction, answer, rater, score = crossed(3)
    A = prediction.size
    leaf = np.where(np.arange(A) < 20, 1, 0)  # leaf 1: a handful of answers
    draw = crossed_draw(answer, rater, 100, np.random.default_rng(0))
    out = calibrated_cells(prediction, answer, rater, score, leaf=leaf, cells=[[1], [0], [7]],
                           draw=draw, rng=np.random.default_rng(1))
    assert isinstance(out[0], NoEstimate) and out[0].reason in ("too_few_labelled", "no_overlap")
    assert isinstance(out[1], CalibratedMean)
    assert isinstance(out[2], NoEstimate) and out[2].reason == "all_unparsed"


def test_a_draw_that_misses_the_cells_ratings_is_refused():
    prediction, answer, rater, score = crossed(4)
    half = answer < answer.max() // 2
    draw = crossed_draw(answer[half], rater[half], 50, np.random.default_rng(0))
    with pytest.raises(ValueError, match="draw does not cover"):
        calibrated_cells(prediction, answer, rater, score, leaf=np.zeros(prediction.size),
                         cells=[[0]], draw=draw, rng=np.random.default_rng(1))
