"""The two-way cluster-robust variance of statistics from per-cell
influences, and the pigeonhole bootstrap's expected variance beside it (see
:mod:`clinieval.stats.crossed` for the formulas). Every design's variance is
a sum of squared cluster totals; the small-sample factor is G / (G - 1).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from clinieval.stats.crossed.codes import _dense

_ELEMENT_BUDGET = 2**22  # dense influences summed directly up to this size


class CrossedVariance(NamedTuple):
    """Linearised variances of ratio means under several designs, per statistic."""

    rows: np.ndarray  # one-way cluster variance by rows (raters), with G/(G-1)
    cols: np.ndarray  # one-way cluster variance by columns (cases), with G/(G-1)
    cells: np.ndarray  # variance by (row, column) cells, with K/(K-1)
    twoway: np.ndarray  # rows + cols - cells, never below either one-way variance
    pigeonhole: np.ndarray  # expectation of the pigeonhole bootstrap's variance
    clusters: np.ndarray  # the fewer of raters and cases with data, per statistic


def crossed_ratio_variance(rows, cols, num, den) -> CrossedVariance:
    """Linearised variances of the ratio means ``sum(num) / sum(den)``.

    ``num`` and ``den`` are ``(K, G)`` per-cell totals of ``G`` statistics;
    cell ``k`` lies in row ``rows[k]`` and column ``cols[k]``. The ratio's
    influence of a cell is ``z = (num - ratio * den) / sum(den)``; each
    design's variance sums the squared totals of ``z`` over its clusters.
    """
    num = sp.csr_matrix(num, dtype=float)
    den = sp.csr_matrix(den, dtype=float)
    n = np.asarray(den.sum(axis=0)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.asarray(num.sum(axis=0)).ravel() / n
        z = (num - den.multiply(np.nan_to_num(ratio))).multiply(1.0 / n).tocsr()
    return influence_variance(rows, cols, z, den)


def count_ratio_variance(rows, cols, stats, num_map, den_map, contrasts=None) -> CrossedVariance:
    """:func:`crossed_ratio_variance` of ``stats @ num_map`` over
    ``stats @ den_map``, with the influences from one sparse product
    ``stats @ ((num_map - den_map * ratio) / n)`` (less memory on millions of
    cells). ``contrasts`` ``(G, H)``, if given, adds ``H`` linear
    combinations of the ``G`` ratios (e.g. a difference of two means) after
    them: their influences are the same combinations of the ratios' ones."""
    stats = sp.csr_matrix(stats, dtype=float)
    num_map, den_map = sp.csr_matrix(num_map, dtype=float), sp.csr_matrix(den_map, dtype=float)
    totals = np.asarray(stats.sum(axis=0)).ravel()
    n = den_map.T @ totals
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.nan_to_num((num_map.T @ totals) / n)
        scale = sp.diags(np.where(n > 0, 1.0 / n, 0.0))
    influence = (num_map - den_map @ sp.diags(ratio)) @ scale
    present = den_map
    if contrasts is not None:
        contrasts = sp.csr_matrix(contrasts, dtype=float)
        influence = sp.hstack([influence, influence @ contrasts]).tocsr()
        present = sp.hstack([den_map, den_map @ abs(contrasts)]).tocsr()
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    if _dense(row_code.astype(np.int64) * n_cols + col_code)[1] < stats.shape[0]:
        return influence_variance(rows, cols, stats @ influence, stats @ present)
    return _distinct_cell_variance(row_code, n_rows, col_code, n_cols, stats, influence,
                                   present)


def _distinct_cell_variance(row_code, n_rows: int, col_code, n_cols: int, stats, influence,
                            present) -> CrossedVariance:
    """:func:`influence_variance` of ``stats @ influence`` when every row of
    ``stats`` is a cell of its own (distinct (row, column) pairs), a block of
    cells at a time: the rows' and columns' totals are dense accumulators
    and each cell's square is summed as it comes, so the cells x statistics
    influences (3.5 GB for co-failure at 100x) never exist at once."""
    width = influence.shape[1]
    row_totals, col_totals = np.zeros((n_rows, width)), np.zeros((n_cols, width))
    row_seen = np.zeros((n_rows, width), dtype=bool)
    col_seen = np.zeros((n_cols, width), dtype=bool)
    s_cells, g_cells = np.zeros(width), np.zeros(width, dtype=np.int64)
    step = max(1, _ELEMENT_BUDGET // max(width, 1))
    # Products with the (statistics x width) maps made dense: the same sums
    # in the same order as the sparse product (a missing term adds 0), without
    # building a sparse result to densify.
    influence, present = _as_dense(influence), _as_dense(present)
    for start in range(0, stats.shape[0], step):
        block = stats[start:start + step]
        z = block @ influence
        here = (block @ present) != 0
        for code, n_codes, totals, seen in ((row_code, n_rows, row_totals, row_seen),
                                            (col_code, n_cols, col_totals, col_seen)):
            members = sp.csr_matrix((np.ones(block.shape[0]), (
                code[start:start + block.shape[0]], np.arange(block.shape[0]))),
                shape=(n_codes, block.shape[0]))
            totals += members @ z
            seen |= (members @ here.astype(float)) > 0
        s_cells += (z**2).sum(axis=0)
        g_cells += here.sum(axis=0)
    return _combine((row_totals**2).sum(axis=0), row_seen.sum(axis=0),
                    (col_totals**2).sum(axis=0), col_seen.sum(axis=0), s_cells, g_cells,
                    n_rows, n_cols)


def _as_dense(matrix) -> np.ndarray:
    return matrix.toarray() if sp.issparse(matrix) else np.asarray(matrix, dtype=float)


def influence_variance(rows, cols, z, present) -> CrossedVariance:
    """Variances of statistics from per-cell linearised influences ``z``
    ``(K, G)`` (dense or sparse) under each design; ``present`` ``(K, G)`` is
    nonzero where a cell holds data of a statistic (to count its clusters).
    See the module docstring for the formulas."""
    if sp.issparse(z) and z.shape[0] * z.shape[1] <= _ELEMENT_BUDGET:  # dense sums are faster
        z, present = z.toarray(), present.toarray()
    if sp.issparse(z):
        z, present = sp.csr_matrix(z, dtype=float), sp.csr_matrix(present, dtype=float)
    else:
        z, present = np.asarray(z, dtype=float), np.asarray(present) != 0
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    cell_code, _ = _dense(row_code.astype(np.int64) * n_cols + col_code)
    s_rows, g_rows = _cluster_squares(row_code, z, present)
    s_cols, g_cols = _cluster_squares(col_code, z, present)
    s_cells, g_cells = _cluster_squares(cell_code, z, present)
    return _combine(s_rows, g_rows, s_cols, g_cols, s_cells, g_cells, n_rows, n_cols)


def _cluster_squares(code, z, present) -> tuple[np.ndarray, np.ndarray]:
    """Per statistic: the sum over clusters of the squared cluster totals of
    ``z``, and the number of clusters where ``present`` is nonzero.
    Sparse ``z``: cluster totals come from one sparse product with the
    cluster indicator and stay sparse, as a dense clusters x statistics
    array would not fit for (rater, case) cells at 100x paper scale (only
    sums over each column's entries are taken, so the product's entries
    need no sorting). Dense ``z`` (few statistics, e.g. the Bradley-Terry
    strengths): the product of the cluster indicator, column-compressed
    (one entry per row of ``z``, so built without sorting), with ``z``: each
    cluster's row of totals adds its rows of ``z`` in row order, as a
    bincount over (cluster, statistic) bins would, without the bins' keys."""
    n_clusters, n_stats = (int(code.max()) + 1 if code.size else 0), z.shape[1]
    if not sp.issparse(z):
        members = sp.csc_matrix((np.ones(code.size), code, np.arange(code.size + 1)),
                                shape=(n_clusters, code.size))
        totals = members @ z
        # counts of present rows: positive in float32 whatever their size
        seen = (members.astype(np.float32) @ present.astype(np.float32)) > 0
        totals **= 2
        return totals.sum(axis=0), seen.sum(axis=0)
    if n_clusters == code.size and np.array_equal(code, np.arange(code.size)):
        z, present = sp.csc_matrix(z), sp.csc_matrix(present)  # each row its own cluster
        present.eliminate_zeros()
        return np.asarray(z.multiply(z).sum(axis=0)).ravel(), np.diff(present.indptr)
    members = sp.csr_matrix((np.ones(code.size), (code, np.arange(code.size))),
                            shape=(n_clusters, code.size))
    totals = members @ sp.csr_matrix(z)
    seen = members @ (sp.csr_matrix(present) != 0).astype(float)
    return (np.bincount(totals.indices, weights=totals.data**2, minlength=n_stats),
            np.bincount(seen.indices, minlength=n_stats))


def _small_sample(clusters) -> np.ndarray:
    """G / (G - 1), the usual cluster-robust small-sample factor (1 if G < 2)."""
    return np.where(clusters > 1, clusters / np.maximum(clusters - 1, 1), 1.0)


def _combine(s_rows, g_rows, s_cols, g_cols, s_cells, g_cells, n_rows: int,
             n_cols: int) -> CrossedVariance:
    """The variances of a crossed design from its cluster sums of squares:
    one-way by rows and by columns, the two-way (rows + columns - cells,
    never below either one-way term) and the pigeonhole bootstrap's."""
    c_rows, c_cols, c_cells = (_small_sample(g) for g in (g_rows, g_cols, g_cells))
    v_rows, v_cols = c_rows * s_rows, c_cols * s_cols
    twoway = np.maximum(v_rows + v_cols - c_cells * s_cells, np.maximum(v_rows, v_cols))
    pigeon = (1 - 1 / n_cols) * s_rows + (1 - 1 / n_rows) * s_cols + s_cells
    return CrossedVariance(v_rows, v_cols, c_cells * s_cells, twoway, pigeon,
                           np.minimum(g_rows, g_cols))
