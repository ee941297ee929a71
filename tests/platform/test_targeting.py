"""Decision-targeted assignment's weights and draws (pure): hand-worked cell
weights, shares that keep the monitoring share on settled cells, and pick
keys whose first draw follows the shares (checked with scipy's chi-square
test, on every subset the walk may be left with)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from clinieval.platform.targeting import (
    FRESH_WEIGHT,
    answer_shares,
    cell_weight,
    decision_weights,
    pick_keys,
)


def test_cell_weight_is_one_answers_narrowing_over_the_distance_left():
    # half-width (0.25 - 0.05) / 2 = 0.1; one more of 30 answers narrows it by
    # 0.1 * (1 - sqrt(30/31)) = 0.0016261; the estimate 0.12 is above the 0.10
    # threshold, so the lower bound must climb 0.10 - 0.05 = 0.05: 0.032522.
    assert cell_weight(0.05, 0.25, 0.12, 0.10, 30) == pytest.approx(0.032522, abs=1e-6)
    # below the threshold the upper bound must fall: 0.25 - 0.10 = 0.15
    assert cell_weight(0.05, 0.25, 0.08, 0.10, 30) == pytest.approx(0.0016261 / 0.15, rel=1e-4)
    # nearly settled weighs more than sitting on the threshold
    assert cell_weight(0.01, 0.101, 0.04, 0.10, 100) > cell_weight(0.05, 0.15, 0.10, 0.10, 100)


def test_decision_weights_settled_cells_are_none():
    rows = [{"criterion": "harm", "scope": "model", "model": "m", "specialty": None,
             "verdict": "pass", "lower": 0, "upper": 0.05, "estimate": 0.02,
             "threshold": 0.1, "answers": 80},
            {"criterion": "harm", "scope": "model", "model": "n", "specialty": None,
             "verdict": "open", "lower": 0.05, "upper": 0.25, "estimate": 0.12,
             "threshold": 0.1, "answers": 30}]
    w = decision_weights(rows)
    assert w[("harm", "model", "m", None)] is None
    assert w[("harm", "model", "n", None)] == pytest.approx(0.032522, abs=1e-6)


def test_shares_spread_cells_over_their_answers_and_keep_the_monitoring_share():
    cells = [[("a",)]] * 4 + [[("b",)]] * 2 + [[("s",)]] * 4 + [[("fresh",)]]
    room = np.array([1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1], dtype=bool)
    share = answer_shares(cells, room, {("a",): 0.2, ("b",): 0.1, ("s",): None}, 0.1)
    assert share.sum() == pytest.approx(1.0)
    assert share[3] == 0  # no room
    assert share[6:10].sum() == pytest.approx(0.1)  # the settled cell: monitoring only
    assert np.allclose(share[6:10], 0.025)
    # open: cells a, b, fresh weigh 0.2 : 0.1 : 1, over 0.9 of the picks, each
    # spread over its answers with room (3, 2 and 1)
    total = 0.2 + 0.1 + FRESH_WEIGHT
    assert share[:3].sum() == pytest.approx(0.9 * 0.2 / total)
    assert np.allclose(share[:3], share[0])
    assert share[4:6].sum() == pytest.approx(0.9 * 0.1 / total)
    assert share[10] == pytest.approx(0.9 * FRESH_WEIGHT / total)


def test_everything_settled_offers_the_monitoring_share_and_a_cell_spreads_evenly():
    cells = [[("s",)]] * 4
    # all settled: a clinician gets a task with probability 0.1, spread evenly
    assert np.allclose(answer_shares(cells, np.ones(4, bool), {("s",): None}, 0.1), 0.025)
    # within an open cell every answer with room has the same share, so the
    # cell's rated answers are a uniform sample of it (the sequences need it)
    share = answer_shares([[("a",)]] * 3, np.array([True, False, True]), {("a",): 0.5}, 0.1)
    assert share == pytest.approx([0.5, 0.0, 0.5])


def test_an_answer_belongs_to_its_heaviest_open_cell():
    cells = [[("g1", "m"), ("g2", "m")], [("g1", "n"), ("g2", "n")]]
    weights = {("g1", "m"): None, ("g2", "m"): 0.3, ("g1", "n"): None, ("g2", "n"): None}
    share = answer_shares(cells, np.ones(2, bool), weights, 0.1)
    assert share == pytest.approx([0.9, 0.1])  # m is open in g2; n settled in both


@pytest.mark.parametrize("removed", [(), (0,), (1, 3)])
def test_the_first_key_falls_on_each_answer_with_its_share(removed):
    """The walk takes the first answer with room by key: over 20,000 draws of
    keys the first among those left is distributed as their shares
    renormalised (the Efraimidis-Spirakis property), also when some answers
    are skipped (full, or the clinician's own)."""
    share = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    rng = np.random.default_rng(7)
    left = np.setdiff1d(np.arange(share.size), removed)
    firsts = np.zeros(share.size)
    for _ in range(20_000):
        keys = pick_keys(share, rng)
        firsts[left[np.argmin(keys[left])]] += 1
    expected = share[left] / share[left].sum() * 20_000
    assert stats.chisquare(firsts[left], expected).pvalue > 1e-3
    assert firsts[list(removed)].sum() == 0


def test_keys_are_missing_where_the_share_is_zero():
    keys = pick_keys(np.array([0.5, 0.0, 0.5]), np.random.default_rng(1))
    assert math.isnan(keys[1]) and np.isfinite(keys[[0, 2]]).all()
