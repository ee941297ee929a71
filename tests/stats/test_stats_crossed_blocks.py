"""count_ratio_variance on distinct (rater, case) cells, block by block, against
the sparse influence products of influence_variance on the same cells."""

import numpy as np
import pytest
import scipy.sparse as sp

import clinieval.stats.crossed.variance as variance
from clinieval.stats import count_ratio_variance, influence_variance


def _direct(rows, cols, stats, num_map, den_map, contrasts):
    """The influences written out: (num - ratio * den) / n per cell, the
    contrasts' influences the same combinations, then influence_variance."""
    num, den = stats @ num_map, stats @ den_map
    n = den.sum(axis=0)
    ratio = num.sum(axis=0) / n
    z = (num - den * ratio) / n
    present = den
    if contrasts is not None:
        z = np.hstack([z, z @ contrasts])
        present = np.hstack([den, den @ np.abs(contrasts)])
    return influence_variance(rows, cols, sp.csr_matrix(z), sp.csr_matrix(present))


@pytest.mark.parametrize("budget", [2**22, 12])
@pytest.mark.parametrize("with_contrasts", [False, True])
def test_blocked_cells_give_the_variance_of_the_whole_influence_matrix(monkeypatch, budget,
                                                                        with_contrasts):
    # 7 raters x 30 cases, about half the cells rated, each cell once, in
    # shuffled order; a budget of 12 weights makes blocks of 3 cells.
    monkeypatch.setattr(variance, "_ELEMENT_BUDGET", budget)
    rng = np.random.default_rng(11)
    pairs = np.flatnonzero(rng.random(7 * 30) < 0.5)
    pairs = pairs[rng.permutation(pairs.size)]
    rows, cols = pairs // 30, pairs % 30
    stats = (rng.integers(0, 3, (pairs.size, 10)) * (rng.random((pairs.size, 10)) < 0.4))
    stats = stats.astype(float)
    num_map = np.vstack([np.arange(-2, 3)[:, None] * [1, 0], np.arange(-2, 3)[:, None] * [0, 1]])
    den_map = np.vstack([np.ones((5, 1)) * [1, 0], np.ones((5, 1)) * [0, 1]])
    contrasts = np.array([[1.0], [-1.0]]) if with_contrasts else None
    got = count_ratio_variance(rows, cols, sp.csr_matrix(stats), num_map, den_map, contrasts)
    want = _direct(rows, cols, stats, num_map, den_map, contrasts)
    for field in want._fields:
        assert np.allclose(getattr(got, field), getattr(want, field), rtol=1e-12,
                           atol=0), field
    assert got.clusters.tolist() == want.clusters.tolist()


def test_repeated_cells_still_pool_their_influences():
    # Two entries of one (rater, case) cell are one cluster of the cell term:
    # summing them first differs from counting each as its own cell.
    rows, cols = np.array([0, 0, 1, 1, 2]), np.array([0, 0, 1, 2, 2])
    stats = np.array([[1, 0], [0, 1], [1, 1], [2, 0], [0, 2]], dtype=float)
    num_map, den_map = np.array([[1.0], [-1.0]]), np.ones((2, 1))
    got = count_ratio_variance(rows, cols, stats, num_map, den_map)
    want = _direct(rows, cols, stats, num_map, den_map, None)
    assert got.cells == pytest.approx(want.cells, rel=1e-12)
    assert got.twoway == pytest.approx(want.twoway, rel=1e-12)
