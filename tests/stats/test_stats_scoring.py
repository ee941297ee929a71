"""Automated-scoring estimators against brute force, statsmodels and hand-worked cases."""

import gc
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from clinieval.stats.scoring import (
    benchmark_summary,
    bootstrap_case_means,
    gate_case_scores,
    holm_adjust,
    paired_comparisons,
    paired_comparisons_many,
    rubric_example_scores,
    worst_at_k,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=7))
def test_worst_at_k_equals_enumeration_of_every_subset(values):
    n = len(values)
    exact = worst_at_k(np.array([values], dtype=float))[0]
    for k in range(1, n + 1):
        brute = np.mean([min(c) for c in combinations(values, k)])
        assert exact[k - 1] == pytest.approx(brute, abs=1e-12)


def test_worst_at_k_hand_worked():
    # samples 0.2, 0.9, 0.5 -> sorted 0.2, 0.5, 0.9
    # k=2: subsets {.2,.5} {.2,.9} {.5,.9} -> minima .2 .2 .5 -> mean 0.3
    out = worst_at_k([[0.2, 0.9, 0.5]])[0]
    assert out == pytest.approx([1.6 / 3, 0.3, 0.2])


def test_rubric_example_scores_hand_worked():
    # example 0: +5 met, +3 not met, -2 met -> (5 - 2) / 8 = 0.375
    # example 1: +4 not met, -6 met -> -6 / 4 clipped to 0
    # example 2: only a negative item -> undefined
    points = [5, 3, -2, 4, -6, -1]
    met = [True, False, True, False, True, False]
    out = rubric_example_scores(points, met, [0, 0, 0, 1, 1, 2])
    assert out[:2] == pytest.approx([0.375, 0.0])
    assert np.isnan(out[2])


def test_gate_case_scores_binary_and_graded():
    # case 0 binary, rules met/not met -> 0; case 1 graded, 3 of 3+2 points -> 0.6
    # case 2 binary, all met -> 1
    out = gate_case_scores([1, 1, 3, 2, 1], [True, False, True, False, True],
                           [0, 0, 1, 1, 2], graded=[False, True, False])
    assert out == pytest.approx([0.0, 0.6, 1.0])


@pytest.fixture
def frozen_heap():
    """statsmodels' multipletests calls gc.collect() on every call, which in
    a test worker's heap (every earlier test's objects) took about a second
    a call: the objects already there are frozen out of the collector's
    scans for the test (gc.freeze), and let back in after it."""
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("frozen_heap")
def test_holm_matches_statsmodels():
    rng = np.random.default_rng(3)
    for _ in range(20):
        p = rng.uniform(0, 0.2, rng.integers(1, 12))
        expected = multipletests(p, method="holm")[1]
        assert holm_adjust(p) == pytest.approx(expected, abs=1e-12)


@pytest.mark.usefixtures("frozen_heap")
def test_holm_leaves_undefined_p_values_out_of_the_family():
    # The case: [0.01, NaN, 0.03, 0.2] was adjusted as a family of 4
    # ([0.04, NaN, 0.09, 0.40]); statsmodels on the three defined gives
    # 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, 1 x 0.2 = 0.2.
    p = np.array([0.01, np.nan, 0.03, 0.2])
    out = holm_adjust(p)
    assert np.isnan(out[1])
    assert out[[0, 2, 3]] == pytest.approx([0.03, 0.06, 0.2], abs=1e-12)
    rng = np.random.default_rng(4)
    for _ in range(20):
        p = rng.uniform(0, 0.2, rng.integers(1, 12))
        p[rng.random(p.size) < 0.3] = np.nan
        defined = ~np.isnan(p)
        out = holm_adjust(p)
        assert np.isnan(out[~defined]).all()
        if defined.any():
            expected = multipletests(p[defined], method="holm")[1]
            assert out[defined] == pytest.approx(expected, abs=1e-12)


def test_paired_bootstrap_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(40, 3)) + [0.0, 0.3, 0.1]
    B = 400
    fast = bootstrap_case_means(scores, B, np.random.default_rng(11))
    # The plain way: draw case indices, average every column on them.
    loop_rng = np.random.default_rng(11)
    picks = loop_rng.integers(0, 40, size=(B, 40))
    plain = np.array([scores[row].mean(axis=0) for row in picks])
    assert fast == pytest.approx(plain, abs=1e-12)


def test_paired_comparisons_find_a_planted_difference_only():
    rng = np.random.default_rng(5)
    base = rng.normal(size=300)
    scores = np.column_stack([base, base + 0.5 + rng.normal(0, 0.1, 300), base])
    out = {(c.first, c.second): c for c in paired_comparisons(scores, 2000, rng)}
    assert out[(0, 1)].p_holm < 0.01 and out[(0, 1)].upper < 0
    assert out[(0, 2)].p_value == pytest.approx(1.0)
    assert out[(0, 2)].lower == out[(0, 2)].upper == 0.0


def test_paired_comparisons_many_is_the_paired_bootstrap_of_each_block():
    # Two blocks of the same size share one draw of counts, each on its own
    # random order of cases; a third block of another size gets its own draw.
    # The plain way: the same permutations and index draws, a loop per block.
    rng = np.random.default_rng(2)
    blocks = [rng.normal(size=(30, 3)), rng.normal(size=(30, 2)) + [0, 1],
              rng.normal(size=(12, 2))]
    B = 300
    fast = paired_comparisons_many(blocks, B, np.random.default_rng(9), dtype=np.float64)
    plain_rng = np.random.default_rng(9)
    orders = [plain_rng.permutation(30), plain_rng.permutation(30)]
    picks30 = plain_rng.integers(0, 30, size=(B, 30))
    picks12 = (plain_rng.permutation(12), plain_rng.integers(0, 12, size=(B, 12)))
    draws = [(orders[0], picks30), (orders[1], picks30), picks12]
    for block, (order, picks), got in zip(blocks, draws, fast, strict=True):
        reps = np.array([block[order][row].mean(axis=0) for row in picks])
        for c in got:
            rep_diff = reps[:, c.first] - reps[:, c.second]
            assert c.difference == pytest.approx(block[:, c.first].mean()
                                                 - block[:, c.second].mean(), abs=1e-12)
            assert c.lower == pytest.approx(np.quantile(rep_diff, 0.025), abs=1e-12)
            p = np.mean(np.abs(rep_diff - c.difference) >= abs(c.difference) - 1e-12)
            assert c.p_value == pytest.approx(p, abs=1e-12)
        assert [c.p_holm for c in got] == pytest.approx(holm_adjust([c.p_value for c in got]))


def test_paired_comparisons_many_in_float32_agrees_with_float64():
    rng = np.random.default_rng(4)
    blocks = [rng.uniform(size=(500, 4)) + [0, 0.02, 0.05, 0] for _ in range(3)]
    lo32 = paired_comparisons_many(blocks, 2000, np.random.default_rng(1))
    lo64 = paired_comparisons_many(blocks, 2000, np.random.default_rng(1), dtype=np.float64)
    for a, b in zip(sum(lo32, []), sum(lo64, []), strict=True):
        assert a.lower == pytest.approx(b.lower, abs=1e-5)
        assert a.upper == pytest.approx(b.upper, abs=1e-5)
        assert a.p_value == pytest.approx(b.p_value, abs=2 / 2000)


def test_benchmark_summary_hand_worked():
    # Two benchmarks, three models.
    # bench 1: 0.9, 0.5, 0.5 -> model 0 wins 2; models 1, 2 tie (0.5 each) and lose to 0
    # bench 2: 0.2, 0.8, 0.4 -> model 1 wins 2, model 2 beats 0
    # wins (half ties): m0 = (2 + 0) / 4 = 0.5; m1 = (0.5 + 2) / 4 = 0.625;
    #                   m2 = (0.5 + 1) / 4 = 0.375
    table = np.array([[0.9, 0.2], [0.5, 0.8], [0.5, 0.4]])
    out = benchmark_summary(table)
    assert out.win_rate == pytest.approx([0.5, 0.625, 0.375])
    # per-benchmark shares m0: 1.0, 0.0 -> SD (ddof 1) = sqrt(0.5)
    assert out.win_sd[0] == pytest.approx(np.sqrt(0.5))
    assert out.macro_average == pytest.approx([0.55, 0.65, 0.45])
    # ">=" counts both tied models as winners: m1 = (1 + 2) / 4
    assert benchmark_summary(table, ties="geq").win_rate[1] == pytest.approx(0.75)
