"""Intervals for crossed designs: raters x cases.

Clinician ratings are crossed: each case is rated by several raters and each
rater rates many cases (of many models). Rater leniency and case difficulty
both make ratings correlated, so resampling individual ratings understates
the uncertainty, and resampling either raters or cases alone still misses
the other source.

The **pigeonhole bootstrap** (McCullagh, 2000, Bernoulli 6:285; Owen, 2007,
Ann. Appl. Stat. 1:246) resamples the rows (raters) and the columns (cases)
of the rater x case table independently with replacement: rater ``r`` is
drawn ``U_r`` times and case ``c`` is drawn ``V_c`` times, so the cell
``(r, c)`` enters the replicate ``U_r * V_c`` times. Here this is done as
weights on cells of sufficient statistics, vectorised over replicates.

Owen (2007) shows the pigeonhole variance is conservative. For a ratio mean
with centred linearised contributions ``z`` its expectation is::

    (1 - 1/C) S_rows + (1 - 1/R) S_cols + S_cells

where ``S_rows = sum_r (sum of z over rater r)**2`` and likewise for cases
and for cells: each cell's own variation (the rater x case interaction and
the rating noise) is counted three times, and in a sparse design (three
raters per case) the case variation is counted again inside the rater sums.
That widens intervals by about a quarter. The variance a crossed design
needs is the two-way cluster-robust one (Cameron, Gelbach & Miller, 2011,
J. Bus. Econ. Stat. 29:238)::

    V = c_R S_rows + c_C S_cols - c_K S_cells,     c_G = G / (G - 1)

so :func:`crossed_ratio_bootstrap` scales each statistic's replicate
deviations from the estimate by ``sqrt(V / pigeonhole variance)``: the
replicates keep the pigeonhole's shape and its correlation between
statistics (raters shared by models), with the two-way variance.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from clinieval.stats._dist import norm_ppf, t_ppf
from clinieval.stats.bootstrap import percentile_ci, resample_counts
from clinieval.stats.bradley_terry import DEFAULT_ALPHA, bt_fit, bt_fit_many, vote_credits
from clinieval.stats.proportions import wilson_ci

_ELEMENT_BUDGET = 2**22  # dense influences summed directly up to this size
# Pigeonhole cell weights per pass (4 MB as float32): the weights are written,
# multiplied by the column weights and read by the product, so passes that
# stay in cache are faster (about a third less time for the votes' cells,
# with two entries each, and a sixth for the ratings' cells, at paper scale).
_WEIGHT_BUDGET = 2**20
_MIN_CHUNK = 64  # replicates per pass over the cells, at least
_LANE_PASS = 256  # replicates per pass of the 16-bit lanes (several chunks of draws)
_LANE_BYTES = 2**20  # 16-bit cell weights per pass over a block of cells, in bytes
_LANE_TOTAL = 2**12  # statistics' totals below this leave 16-bit lanes room for the weights
_BIN_BUDGET = 2**25  # cluster x group bins per pass of a grouped variance
_DENSE_BINS = 2**21  # cluster x group bins up to which grouped variances bincount them
_TABLE_BYTES = 40  # bytes per code that a table over the codes' range may take
_PROBE = 2**16  # runs whose order and groups decide quickly against a fast path


class CrossedVariance(NamedTuple):
    """Linearised variances of ratio means under several designs, per statistic."""

    rows: np.ndarray  # one-way cluster variance by rows (raters), with G/(G-1)
    cols: np.ndarray  # one-way cluster variance by columns (cases), with G/(G-1)
    cells: np.ndarray  # variance by (row, column) cells, with K/(K-1)
    twoway: np.ndarray  # rows + cols - cells, never below either one-way variance
    pigeonhole: np.ndarray  # expectation of the pigeonhole bootstrap's variance
    clusters: np.ndarray  # the fewer of raters and cases with data, per statistic


def pigeonhole_weights(n_rows: int, n_cols: int, B: int, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Multiplicities ``(B, n_rows)`` and ``(B, n_cols)``: each replicate
    draws ``n_rows`` rows and ``n_cols`` columns with replacement."""
    return (resample_counts(np.ones(n_rows, dtype=np.int64), B, rng),
            resample_counts(np.ones(n_cols, dtype=np.int64), B, rng))


def pigeonhole_totals(rows, cols, stats, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, P)`` pigeonhole-bootstrap replicates of column totals of ``stats``.

    ``stats`` is a ``(K, P)`` array (dense or sparse) of sufficient statistics
    of ``K`` cells; cell ``k`` belongs to row ``rows[k]`` and column
    ``cols[k]`` (any integer codes; only codes that occur are resampled).
    Replicate ``b`` is ``sum_k U[b, rows[k]] * V[b, cols[k]] * stats[k]``.
    """
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    stats = sp.csr_matrix(stats, dtype=float)
    if np.any(row_code[1:] < row_code[:-1]):  # cells in row order (the totals do not care)
        order = np.argsort(row_code, kind="stable")
        row_code, col_code, stats = row_code[order], col_code[order], stats[order]
    # Column-compressed (stats x cells): the product then reads each cell's
    # weights once and adds them into a (stats x replicates) block that
    # stays in cache, several times faster than the row-compressed form.
    by_stat = stats.T.tocsc()
    # Counts and vote credits are non-negative multiples of 1/2 and the weights
    # are integers, so float32 sums are exact while totals stay below 2**23;
    # that halves the memory traffic of the product. Otherwise float64.
    exact = bool(np.all(by_stat.data >= 0)) and not np.any(np.modf(by_stat.data * 2)[0])
    lanes = _Lanes.fit(by_stat, row_code, col_code, n_rows, n_cols) if exact else None
    out = np.empty((B, by_stat.shape[0]))
    # Replicates in chunks and cells in blocks, so the weights in memory are
    # at most _WEIGHT_BUDGET however many cells there are; a chunk keeps at
    # least _MIN_CHUNK replicates so that each pass over the matrix does
    # enough work per entry read. The draws are made chunk by chunk (their
    # order fixes the numbers); the 16-bit lanes take several chunks per pass.
    chunk = min(B, max(_MIN_CHUNK, _WEIGHT_BUDGET // max(row_code.size, 1)))
    per_pass = max(1, _LANE_PASS // chunk) if lanes is not None else 1
    blocks = None
    for first in range(0, B, chunk * per_pass):
        if lanes is not None:  # the draws' counts go straight to the lanes' layout
            U, V = _transposed_weights(n_rows, n_cols, chunk, min(chunk * per_pass, B - first),
                                       rng)
            part = lanes.totals(U, V)
            U, V = U.T, V.T
        else:
            U, V = pigeonhole_weights(n_rows, n_cols, min(chunk, B - first), rng)
            part = None
        if part is None:
            if blocks is None:  # (made once, and only when needed)
                matrix = by_stat.astype(np.float32) if exact else by_stat
                blocks = _cell_blocks(matrix, row_code, n_rows, max(1, _WEIGHT_BUDGET // chunk))
            part = _weighted_totals(blocks, U, V, col_code, matrix.dtype)
            if exact and part.max(initial=0) >= 2**23:  # float32 no longer exact
                whole = _cell_blocks(by_stat, row_code, n_rows, row_code.size)
                part = _weighted_totals(whole, U, V, col_code, by_stat.dtype)
        out[first : first + U.shape[0]] = part.T
    return out


def _transposed_weights(n_rows: int, n_cols: int, chunk: int, B: int,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pigeonhole_weights` for ``B`` replicates drawn ``chunk`` at a
    time (rows, then columns, chunk after chunk, as :func:`pigeonhole_totals`
    draws them), transposed to ``(n_rows, B)`` and ``(n_cols, B)`` uint16
    (a count is at most ``n_rows`` or ``n_cols``, below 2**16 here). The
    draws are the same: :func:`resample_counts` of ones is one stream of
    uniform index draws, whatever its chunks, counted per replicate and
    written unit by unit."""
    rows_t = np.empty((n_rows, B), dtype=np.uint16)
    cols_t = np.empty((n_cols, B), dtype=np.uint16)
    shift = {}
    for start in range(0, B, chunk):
        size = min(chunk, B - start)
        for n, out in ((n_rows, rows_t), (n_cols, cols_t)):
            picks = rng.integers(0, n, size=size * n)
            if (n, size) not in shift:
                shift[n, size] = np.repeat(np.arange(0, n * size, n), n)
            picks += shift[n, size]  # replicate-major: each replicate's counts stay in cache
            out[:, start : start + size] = np.bincount(picks, minlength=n * size).reshape(
                size, n).T
    return rows_t, cols_t


class _Lanes:
    """Pigeonhole totals in 16-bit integer lanes: counts (and doubled vote
    credits) times integer weights, summed modulo 2**16. The sparse product
    then moves half of float32's bytes and runs about twice as fast (scipy's
    16-bit loops are vectorised). A lane total equals the true total modulo
    2**16 and is never above it (every term is non-negative), so the totals
    are exact exactly when, per replicate, their sum over the statistics
    equals the exact grand total ``sum_k U[row_k] V[col_k] s_k`` (``s_k`` the
    sum of cell ``k``'s statistics), which a product over the (row, column)
    cells alone gives; a pass where it does not (a total or a weight of
    2**16 or more) is summed in float instead, with the same draws. The
    cells are taken in column (case) order: the cells of a case add into
    the same statistics (its answers' models), which then stay in the
    nearest cache, and the row weights are gathered from the smaller table
    (raters)."""

    def __init__(self, scale: int, blocks: list, row_code, grand, reach: float,
                 largest: float) -> None:
        self.scale, self.blocks, self.row_code = scale, blocks, row_code
        self.grand, self.reach, self.largest = grand, reach, largest

    @classmethod
    def fit(cls, by_stat, row_code, col_code, n_rows: int, n_cols: int) -> _Lanes | None:
        """Lanes for ``by_stat`` (stats x cells, non-negative multiples of
        1/2), or None when its totals leave too little room in 16 bits
        (weights are about 1 on average, so replicate totals stay near the
        statistics' own totals)."""
        scale = 1 if not np.any(np.modf(by_stat.data)[0]) else 2
        totals = np.asarray(by_stat.sum(axis=1)).ravel() * scale
        if by_stat.nnz == 0 or totals.max() >= _LANE_TOTAL or max(n_rows, n_cols) >= 2**16:
            return None  # (fewer rows and columns than 2**16: no weight above 2**16 - 1)
        # Per column and row the sum of their cell's statistics: the grand
        # totals are sum_c V[c] (grand @ U)[c].
        cell_sum = np.asarray(by_stat.sum(axis=0)).ravel() * scale
        grand = sp.csr_matrix((cell_sum.astype(np.float32), (col_code, row_code)),
                              shape=(n_cols, n_rows))
        reach = float(np.bincount(col_code, weights=cell_sum, minlength=n_cols).max())
        # (column codes below 2**16: numpy's stable sort of 16-bit keys is a radix sort)
        order = np.argsort(col_code.astype(np.uint16), kind="stable")
        matrix = by_stat[:, order]
        matrix.data = (matrix.data * scale).astype(np.uint16)
        row_code, col_code = row_code[order], col_code[order]
        width = max(1, _LANE_BYTES // (2 * _LANE_PASS))
        blocks = _cell_blocks(matrix, col_code, n_cols, width)
        return cls(scale, blocks, row_code, grand, reach, float(totals.max()))

    def totals(self, rows_t, cols_t) -> np.ndarray | None:
        """``(P, replicates)`` float totals from the row and column weights
        ``(rows, replicates)`` and ``(columns, replicates)`` (uint16), or
        None when a lane wrapped."""
        most = float(rows_t.max(initial=0)) * float(cols_t.max(initial=0))
        if most >= 2**16:  # a weight would wrap
            return None
        part = np.zeros((self.blocks[0][1].shape[0], rows_t.shape[1]), dtype=np.uint16)
        for cells, block, per_col in self.blocks:
            weights = np.repeat(cols_t, per_col, axis=0)  # (cells in the block, replicates)
            weights *= rows_t[self.row_code[cells]]
            part += block @ weights
        if self.largest * most < 2**16:  # no total can reach 2**16: no wrap to look for
            return part / self.scale if self.scale != 1 else part.astype(float)
        # float32 products below 2**24 are exact; their sums are taken in float64
        exact32 = self.reach * most < 2**24
        dtype = np.float32 if exact32 else np.float64
        by_col = self.grand.astype(dtype) @ rows_t.astype(dtype)
        by_col *= cols_t
        grand = by_col.sum(axis=0, dtype=np.float64)
        if not np.array_equal(part.sum(axis=0, dtype=np.int64), grand):
            return None
        return part / self.scale if self.scale != 1 else part.astype(float)


def _cell_blocks(matrix, code, n_codes: int, width: int) -> list:
    """``(cells, stats x cells block, cells per code)`` for blocks of
    ``width`` cells, sorted by ``code`` (their row, or their column)."""
    return [(slice(start, start + width), matrix[:, start:start + width],
             np.bincount(code[start:start + width], minlength=n_codes))
            for start in range(0, code.size, width)]


def _weighted_totals(blocks, U, V, col_code, dtype) -> np.ndarray:
    """(P, chunk) totals with cell weights U[row] * V[col], in ``dtype``,
    summed over :func:`_cell_blocks`. The cells are in row order, so each
    row's weights are repeated over its cells (cheaper than a gather);
    the column weights are gathered from a row-major copy (a gather from
    the transposed view strides through memory)."""
    rows_t, cols_t = _transposed(U, dtype), _transposed(V, dtype)
    total = np.zeros((blocks[0][1].shape[0], U.shape[0]), dtype=dtype)
    for cells, block, per_row in blocks:
        weights = np.repeat(rows_t, per_row, axis=0)  # (cells in the block, chunk)
        weights *= cols_t[col_code[cells]]
        total += block @ weights
    return total


def _transposed(weights, dtype) -> np.ndarray:
    """``weights.T`` as a C-contiguous ``dtype`` array, copied a block of
    columns at a time: each block's rows stay in cache, about four times
    faster than one strided copy of (replicates x 278 k cases) at 100x."""
    out = np.empty(weights.shape[::-1], dtype=dtype)
    step = 4096
    for start in range(0, weights.shape[1], step):
        out[start : start + step] = weights[:, start : start + step].T
    return out


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


def grouped_ratio_variance(rows, cols, counts, values, groups, n_groups: int
                           ) -> CrossedVariance:
    """:func:`crossed_ratio_variance` of per-group ratio means of counts,
    in one pass over the entries of a sparse cells x columns count matrix.

    ``counts`` ``(K, P)`` holds how many observations of column ``p`` cell
    ``k`` has (cell ``k`` in row ``rows[k]`` and column ``cols[k]``); column
    ``p`` belongs to group ``groups[p]`` (non-decreasing in ``p``) and each of
    its observations has value ``values[p]``. Group ``g``'s ratio is the mean
    value of its observations. An entry's influence is
    ``count * (value - ratio) / n``; runs of entries of one cell and one
    group are summed with ``reduceat`` and the cluster totals are
    bincounts, so no (cells x groups) matrix is built (it would not fit at
    100x paper scale). ``values`` ``(V, P)`` gives ``V`` sets of ratios over
    the same counts (e.g. a mean and a share), sharing the runs and cluster
    codes; the fields then hold ``V * n_groups`` values, set after set.
    """
    counts = sp.csr_matrix(counts, dtype=float)
    counts.sum_duplicates()  # canonical: sorted columns within each row
    groups = np.asarray(groups, dtype=np.int64)
    entry_group = groups.astype(np.int32)[counts.indices]  # int32: 37.5 M entries at 100x
    # A run starts at each cell's first entry and where the group changes.
    boundary = np.zeros(entry_group.size, dtype=bool)
    np.not_equal(entry_group[1:], entry_group[:-1], out=boundary[1:])
    boundary[counts.indptr[:-1][np.diff(counts.indptr) > 0]] = True
    single = bool(boundary.all())  # every run one entry (one rating at 100x): no sums
    if single:
        starts, run_group, run_indptr = None, entry_group, counts.indptr
    else:
        starts = np.flatnonzero(boundary)
        run_group = entry_group[starts]
        run_indptr = np.searchsorted(starts, counts.indptr)
    del boundary, entry_group
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    by_row = _cluster_runs(row_code, n_rows, run_group, run_indptr, n_groups)
    by_col = _cluster_runs(col_code, n_cols, run_group, run_indptr, n_groups)
    g_cells = np.bincount(run_group, minlength=n_groups)
    column_n = np.asarray(counts.sum(axis=0)).ravel()
    n = np.bincount(groups, weights=column_n, minlength=n_groups)
    parts = []
    for value in np.atleast_2d(np.asarray(values, dtype=float)):
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.nan_to_num(np.bincount(groups, weights=column_n * value,
                                              minlength=n_groups) / n)
            scale = np.where(n > 0, 1.0 / n, 0.0)
        # An entry's influence is its count times its column's (value - ratio) / n.
        run_z = ((value - ratio[groups]) * scale[groups])[counts.indices]
        run_z *= counts.data
        if not single:
            run_z = np.add.reduceat(run_z, starts)
        s_cells = np.bincount(run_group, weights=run_z**2, minlength=n_groups)
        parts.append(_combine(*by_row(run_z), *by_col(run_z), s_cells, g_cells, n_rows,
                              n_cols))
    return CrossedVariance(*(np.concatenate(field) for field in zip(*parts, strict=True)))


def _cluster_runs(code, n_codes: int, run_group, run_indptr, n_groups: int):
    """For runs of cells' entries (cell ``k``'s runs at ``run_indptr[k]:
    run_indptr[k + 1]``, each in group ``run_group``) and a cluster ``code``
    per cell: the number of clusters with a run per group, and a function of
    the runs' influences giving, per group, the sum over clusters of their
    squared totals. The totals are one sparse product of the clusters' cell
    indicator with the (cells x groups) runs, cluster by cluster in cell
    order (the sums of a bincount over (cluster, group) bins, several
    times faster on 37.5 M runs: no bins' array, and a cluster's groups
    stay in cache). With few (cluster, group) bins (up to :data:`_DENSE_BINS`,
    as for raters and cases at paper scale) a bincount over them is faster
    than the sparse products' setup and gives the same sums: both add a
    bin's runs in cell order, and the squares over clusters in cluster
    order."""
    cells = code.size
    if n_codes * n_groups <= _DENSE_BINS:
        key = np.repeat(code.astype(np.int64) * n_groups, np.diff(run_indptr))
        key += run_group
        size = n_codes * n_groups
        clusters = (np.bincount(key, minlength=size) > 0).reshape(n_codes, n_groups).sum(axis=0)

        def dense_squares(run_z) -> tuple[np.ndarray, np.ndarray]:
            totals = np.bincount(key, weights=run_z, minlength=size)
            totals **= 2
            return totals.reshape(n_codes, n_groups).sum(axis=0), clusters

        return dense_squares
    members = sp.csr_matrix((np.ones(cells), (code, np.arange(cells))), shape=(n_codes, cells))

    def product(data) -> sp.csr_matrix:
        return members @ sp.csr_matrix((data, run_group, run_indptr), shape=(cells, n_groups))

    seen = product(np.ones(run_group.size))
    clusters = np.bincount(seen.indices, minlength=n_groups)
    del seen

    def squares(run_z) -> tuple[np.ndarray, np.ndarray]:
        totals = product(run_z)
        return np.bincount(totals.indices, weights=totals.data**2, minlength=n_groups), clusters

    return squares


def crossed_unit_variance(values, groups, n_groups: int, unit_case, piece_unit, piece_rater,
                          piece_cell) -> CrossedVariance:
    """Two-way variances of per-group means of per-unit ``values`` (NaN: the
    unit has none), from bincounts.

    A unit (e.g. an answer on one criterion) lies in case ``unit_case`` and
    was judged by the raters of its pieces: piece ``i`` is unit
    ``piece_unit[i]`` seen by rater ``piece_rater[i]`` in (rater, case) cell
    ``piece_cell[i]`` (one piece per rater and unit, e.g. one per rating).
    Every piece carries its unit's whole influence ``(value - mean) / n``;
    cases sum over units, raters and cells over pieces, and the cell term
    removes each unit's own square from the rater term (see
    :func:`crossed_share_variance`).
    """
    z, rated = _unit_influence(values, groups, n_groups)
    return _unit_variance(z, rated, groups, n_groups, unit_case, piece_unit, piece_rater,
                          piece_cell)


def _unit_influence(values, groups, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per unit ``(value - mean of its group) / n of its group`` (0 without
    a value) and whether it has a value."""
    values, groups = np.asarray(values, dtype=float), np.asarray(groups, dtype=np.int64)
    rated = np.isfinite(values)
    n = np.bincount(groups[rated], minlength=n_groups).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(groups[rated], weights=values[rated], minlength=n_groups) / n
        return np.where(rated, (values - mean[groups]) / n[groups], 0.0), rated


def _unit_variance(z, counted, groups, n_groups: int, unit_case, piece_unit, piece_rater,
                   piece_cell) -> CrossedVariance:
    """The two-way variance from per-unit influences ``z``; clusters are
    counted over the units where ``counted`` holds."""
    groups = np.asarray(groups, dtype=np.int64)
    units = np.flatnonzero(counted)
    piece_unit = np.asarray(piece_unit, dtype=np.int64)
    pieces = counted[piece_unit]
    every = bool(pieces.all())  # then no masked copies of the pieces (37.5 M at 100x)
    unit = piece_unit if every else piece_unit[pieces]
    s_cols, g_cols = _run_squares(_bin_codes(np.asarray(unit_case)[units]), groups[units],
                                  z[units], n_groups)
    piece_group, piece_z = groups[unit], z[unit]
    del unit
    s_rows, g_rows = _run_squares(_bin_codes(np.asarray(piece_rater) if every else
                                             np.asarray(piece_rater)[pieces]),
                                  piece_group, piece_z, n_groups)
    if unique_codes(np.asarray(unit_case, dtype=np.int64)[units] * n_groups
                    + groups[units]).size == units.size:
        # No two units of a group share a case, so a (rater, case) cell holds
        # at most one piece of a group (one piece per rater and unit): the
        # cells' totals are the pieces' own influences.
        s_cells = np.bincount(piece_group, weights=np.square(piece_z), minlength=n_groups)
        g_cells = np.bincount(piece_group, minlength=n_groups)
    else:
        s_cells, g_cells = _run_squares(_bin_codes(np.asarray(piece_cell) if every else
                                                   np.asarray(piece_cell)[pieces]),
                                        piece_group, piece_z, n_groups)
    v_rows, v_cols = _small_sample(g_rows) * s_rows, _small_sample(g_cols) * s_cols
    v_cells = _small_sample(g_cells) * s_cells
    twoway = np.maximum(v_rows + v_cols - v_cells, v_cols)
    return CrossedVariance(v_rows, v_cols, v_cells, twoway, twoway, np.minimum(g_rows, g_cols))


def _bin_codes(codes) -> np.ndarray:
    """Cluster codes for :func:`_run_squares`: as they are when already
    non-negative and no wider than their count (rater, case and cell codes
    are), since unused codes only leave empty bins; renumbered otherwise."""
    codes = np.asarray(codes)
    if codes.size and codes.dtype.kind in "iu" and codes.min() >= 0 and codes.max() < codes.size:
        return codes
    return _dense(codes)[0]


def _run_squares(code, group, z, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the sum over clusters of squared cluster totals of the runs'
    ``z``, and how many clusters have a run; bincounts over blocks of groups
    so that clusters x groups bins stay within ``_BIN_BUDGET``."""
    n_clusters = int(code.max()) + 1 if code.size else 0
    width = max(1, min(n_groups, _BIN_BUDGET // max(n_clusters, 1)))
    # A block of one group sums its clusters pairwise (numpy's sum along a
    # contiguous axis), the others one cluster after another, as the fast
    # paths do: they are taken only where the bins would be summed in order.
    in_order = n_groups > 1 and width > 1 and n_groups % width != 1
    if in_order and code.size > 1 and _bins_increase(code[:_PROBE], group[:_PROBE], n_groups):
        key = code.astype(np.int64) * n_groups + group
        if bool((key[1:] > key[:-1]).all()):
            # Runs in (cluster, group) order, one per bin (answers by case at
            # 100x): every path's sums are the runs' own squares in run order.
            return (np.bincount(group, weights=np.square(z), minlength=n_groups),
                    np.bincount(group, minlength=n_groups))
        del key
    if in_order and n_clusters:
        single = _single_group_squares(code, group, z, n_clusters, n_groups)
        if single is not None:
            return single
    squares, clusters = np.zeros(n_groups), np.zeros(n_groups, dtype=np.int64)
    if width == n_groups and n_clusters * n_groups > 4 * code.size:
        # Many more bins than runs ((rater, case) cells by group): the sums
        # run over the occupied bins only; usually each holds one run, and
        # then they are per-group sums of the runs' own squares.
        key = code.astype(np.int64) * n_groups + group
        seen = np.zeros(n_clusters * n_groups, dtype=bool)
        seen[key] = True
        if np.count_nonzero(seen) == key.size:
            return (np.bincount(group, weights=np.square(z), minlength=n_groups),
                    np.bincount(group, minlength=n_groups))
        occupied, run_bin = np.unique(key, return_inverse=True)  # else total them per bin
        totals = np.bincount(run_bin.ravel(), weights=z, minlength=occupied.size)
        return (np.bincount(occupied % n_groups, weights=totals**2, minlength=n_groups),
                np.bincount(occupied % n_groups, minlength=n_groups))
    for first in range(0, n_groups if n_clusters else 0, width):
        last = min(first + width, n_groups)
        # one block (the usual case) takes every run: no masked copies
        inside = slice(None) if width == n_groups else (group >= first) & (group < last)
        key = code[inside].astype(np.int64)  # in place: one array of the runs' length
        key *= last - first
        key += group[inside]
        key -= first
        size = n_clusters * (last - first)
        totals = np.bincount(key, weights=z[inside], minlength=size)
        seen = np.zeros(size, dtype=bool)
        seen[key] = True
        squares[first:last] = (totals**2).reshape(n_clusters, -1).sum(axis=0)
        clusters[first:last] = seen.reshape(n_clusters, -1).sum(axis=0)
    return squares, clusters


def _bins_increase(code, group, n_groups: int) -> bool:
    """Whether the runs' (cluster, group) bins strictly increase."""
    key = code.astype(np.int64) * n_groups + group
    return bool((key[1:] > key[:-1]).all())


def _single_group_squares(code, group, z, n_clusters: int, n_groups: int
                          ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_run_squares` when every cluster's runs lie in one group (cases
    and (rater, case) cells when the groups are specialties, which depend on
    the case only), else None: the clusters' totals are one bincount over
    the clusters instead of over (cluster, group) bins, and their squares are
    added per group in cluster order. Each total adds the same runs in the
    same order as its bin, and the per-group sums skip only empty bins
    (adding 0.0 changes no sum), so the results are the same bits; where
    the general path sums the runs' own squares in run order (many bins,
    one run in each), so does this one."""
    head_code, head_group = code[:_PROBE], group[:_PROBE]  # a quick no on a first part
    if unique_codes(head_code).size != unique_codes(
            head_code.astype(np.int64) * n_groups + head_group).size:
        return None
    group_of = np.full(n_clusters, -1, dtype=np.int64)
    group_of[code] = group
    if not np.array_equal(group_of[code], group):
        return None
    occupied = group_of >= 0
    n_occupied = int(np.count_nonzero(occupied))
    if (n_occupied == code.size and n_clusters * n_groups > 4 * code.size
            and n_clusters * n_groups <= _BIN_BUDGET):
        return (np.bincount(group, weights=np.square(z), minlength=n_groups),
                np.bincount(group, minlength=n_groups))
    totals = np.bincount(code, weights=z, minlength=n_clusters)
    if not occupied.all():
        totals, group_of = totals[occupied], group_of[occupied]
    totals **= 2
    return (np.bincount(group_of, weights=totals, minlength=n_groups),
            np.bincount(group_of, minlength=n_groups))


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


def crossed_share_variance(flags, groups, n_groups: int, cases, piece_answer, piece_rater,
                           piece_cell=None) -> CrossedVariance:
    """Two-way variances of per-group shares of flagged answers, ``(n_groups,)``.

    ``flags`` (1.0 / 0.0 / NaN unrated), ``groups`` and ``cases`` are per
    answer; the pieces ``(piece_answer, piece_rater)`` list which raters
    judged each answer (distinct pairs). A flag such as "any rater failed
    it" depends on the answer and on all its raters, so every rater of an
    answer carries the answer's whole influence ``z = (flag - share) / n``.
    The two-way variance is then ``c_C S_cases + c_R S_raters - c_K S_cells``
    with case totals over answers and rater and (rater, case) totals over
    pieces: the cell term removes each answer's own square from the rater
    term, which leaves the covariance between answers sharing a rater (the
    same subtraction as Cameron, Gelbach & Miller, 2011). Never below the
    one-way case variance. ``pigeonhole`` repeats ``twoway`` (no bootstrap).
    ``piece_cell``, if given, is each piece's (rater, case) cell as any
    non-negative codes (computed here otherwise).
    """
    z, _ = _unit_influence(flags, groups, n_groups)
    cases = np.asarray(cases, dtype=np.int64)
    piece_answer = np.asarray(piece_answer, dtype=np.int64)
    piece_rater = np.asarray(piece_rater, dtype=np.int64)
    # Clusters count where an answer's influence is not 0 (all of a group's
    # answers when its share lies strictly between 0 and 1).
    if piece_cell is None:  # callers with several flags pass the cells coded once
        piece_cell = _dense(piece_rater * (cases.max() + 1) + cases[piece_answer])[0]
    return _unit_variance(z, z != 0, groups, n_groups, cases, piece_answer, piece_rater,
                          piece_cell)


def crossed_ratio_bootstrap(rows, cols, stats, num_map, den_map, B: int,
                            rng: np.random.Generator, level: float = 0.95, contrasts=None
                            ) -> tuple[np.ndarray, CrossedVariance]:
    """Two-way replicates ``(B, G)`` of ratio means of linear statistics.

    Statistic ``g`` is ``sum(stats @ num_map[:, g]) / sum(stats @ den_map[:, g])``
    over the ``K`` cells of ``stats`` ``(K, P)``. Each replicate comes from the
    pigeonhole bootstrap (:func:`pigeonhole_totals`) and its deviation from the
    estimate is scaled by ``sqrt(twoway / pigeonhole)`` (see the module
    docstring), so the replicates have the two-way cluster-robust variance.
    ``contrasts`` ``(G, H)`` adds ``H`` linear combinations of the ratios
    (e.g. differences of means), each scaled to its own two-way variance,
    so the result is ``(B, G + H)``. Also returns the
    :class:`CrossedVariance`. NaN where ``den`` sums to 0.
    """
    totals = pigeonhole_totals(rows, cols, stats, B, rng)
    return crossed_ratio_replicates(totals, rows, cols, stats, num_map, den_map, level,
                                    contrasts)


def crossed_ratio_replicates(totals, rows, cols, stats, num_map, den_map, level: float = 0.95,
                             contrasts=None, variance: CrossedVariance | None = None
                             ) -> tuple[np.ndarray, CrossedVariance]:
    """:func:`crossed_ratio_bootstrap` from its pigeonhole ``totals``
    ``(B, P)`` (:func:`pigeonhole_totals` of ``stats``): the same raw
    replicates serve every set of ratio maps over those statistics.
    ``variance``, if given, is :func:`count_ratio_variance` of the same maps
    computed by the caller (e.g. together with other statistics)."""
    stats = sp.csr_matrix(stats, dtype=float)
    num_map, den_map = sp.csr_matrix(num_map), sp.csr_matrix(den_map)
    # totals @ map is computed by scipy as (map.T @ totals.T).T with a
    # contiguous copy of totals.T each time; one copy serves both maps.
    by_statistic = np.ascontiguousarray(np.asarray(totals).T)
    top, bottom = (num_map.T @ by_statistic).T, (den_map.T @ by_statistic).T
    reps = np.divide(top, bottom, out=np.full(top.shape, np.nan), where=bottom > 0)
    if variance is None:
        variance = count_ratio_variance(rows, cols, stats, num_map, den_map, contrasts)
    column_totals = np.asarray(stats.sum(axis=0)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = (num_map.T @ column_totals) / (den_map.T @ column_totals)
    if contrasts is not None:
        contrasts = sp.csr_matrix(contrasts, dtype=float)
        reps = np.hstack([reps, np.asarray(contrasts.T @ reps.T).T])
        estimate = np.concatenate([estimate, contrasts.T @ estimate])
    return _calibrate(reps, estimate, variance, level), variance


def _calibrate(reps, estimate, variance: CrossedVariance, level: float) -> np.ndarray:
    """Scale replicate deviations to the two-way variance and the t reference."""
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(variance.pigeonhole > 0,
                          np.sqrt(variance.twoway / variance.pigeonhole), 1.0)
    return estimate + factor * t_over_z(variance.clusters, level) * (reps - estimate)


def t_over_z(clusters, level: float = 0.95) -> np.ndarray:
    """Student-t quantile with ``clusters - 1`` degrees of freedom over the
    normal one, at two-sided ``level`` (1 when fewer than 2 clusters)."""
    q = (1 + level) / 2
    df = np.maximum(np.asarray(clusters, dtype=float) - 1, 1)
    return np.where(np.asarray(clusters) > 1, t_ppf(q, df) / norm_ppf(q), 1.0)


def design_effect(variance, share, n, fallback=1.0) -> np.ndarray:
    """Kish's design effect of a share: its variance over ``p (1 - p) / n``.

    Where the share is 0 or 1 (no spread to measure) ``fallback`` is used,
    e.g. the design effect of the mean score of the same ratings. Never
    below 1: clustering is not allowed to make an interval narrower than
    the one for independent ratings.
    """
    share = np.asarray(share, dtype=float)
    binomial = share * (1 - share) / np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        deff = np.where(binomial > 0, np.asarray(variance) / binomial, fallback)
    return np.maximum(np.nan_to_num(deff, nan=1.0), 1.0)


def wilson_design_ci(k, n, deff, level: float = 0.95):
    """Wilson interval on the effective sample size ``n / deff``.

    Keeps Wilson's good behaviour for small proportions (the bound moves
    away from 0 however few failures were seen) while widening it for
    clustering; the effective-n substitution follows Korn & Graubard
    (1998, Survey Methodology 24:193). ``n = 0`` gives NaN.
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    n_eff = n / np.maximum(np.asarray(deff, dtype=float), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        k_eff = np.where(n > 0, k / n, 0.0) * n_eff
    return wilson_ci(k_eff, n_eff, level)


def selected_gap(leader_scores, rates, eligible=None) -> np.ndarray:
    """``rates[leader] - min(rates[eligible])`` per row, where the leader is
    the row's highest ``leader_scores``: both choices made inside the row.

    ``leader_scores`` and ``rates`` are ``(..., M)``; ``eligible`` an
    optional ``(M,)`` mask of models that may be named safest. A row whose
    scores or eligible rates are all NaN (nothing to pick) gives NaN.
    """
    leader_scores, rates = np.asarray(leader_scores, float), np.asarray(rates, float)
    scored = np.isfinite(leader_scores).any(axis=-1)
    leader = np.argmax(np.where(np.isnan(leader_scores), -np.inf, leader_scores), axis=-1)
    at_leader = np.take_along_axis(rates, leader[..., None], axis=-1)[..., 0]
    lowest = np.fmin.reduce(_pool(rates, eligible), axis=-1)  # NaN only if all are NaN
    return np.where(scored, at_leader - lowest, np.nan)


def selection_adjusted_gap_ci(leader_scores, leader_reps, rates, rate_reps, eligible=None,
                              level: float = 0.95) -> tuple[float, float, float]:
    """Gap between the preference leader's rate and the lowest rate, with a
    percentile interval whose replicates re-make both choices.

    With the leader and the safest model held at the observed ones, the
    interval ignores that either choice might have gone another way; here
    each replicate picks its own leader (highest ``leader_reps`` row) and its
    own safest eligible model (lowest ``rate_reps`` row), so the spread of
    the selections enters the interval. In simulation
    (``benchmarks/coverage.py``) this covers at or above the nominal level,
    also when the two safest models are tied. Returns ``(gap, lower,
    upper)`` with the observed gap.
    """
    gap = float(selected_gap(leader_scores, rates, eligible))
    reps = selected_gap(leader_reps, rate_reps, eligible)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return gap, np.nan, np.nan
    lo, hi = percentile_ci(reps, level)
    return gap, float(lo), float(hi)


def _pool(rates, eligible):
    return rates if eligible is None else np.where(np.asarray(eligible), rates, np.nan)


def bt_twoway_bootstrap(a_idx, b_idx, outcome, rows, cols, n_models: int, B: int,
                        rng: np.random.Generator, *, alpha: float = DEFAULT_ALPHA,
                        tie_mode: str = "half", bothbad_mode: str = "half",
                        level: float = 0.95) -> np.ndarray:
    """``(B, m)`` Bradley-Terry strengths under the two-way bootstrap of
    votes over raters (``rows``) and cases (``cols``).

    Each vote's win credits go to its (rater, case) cell; a pigeonhole
    replicate fits the outcome table ``sum_k U[rater_k] V[case_k] W_k`` (see
    :func:`clinieval.stats.bt_fit_many`). As for ratio means, the deviations
    from the fit are scaled to the two-way cluster-robust variance, here of
    the sandwich (influence) form: ``z_v = H^+ g_v`` with ``g_v`` the vote's
    score vector and ``H`` the Fisher information at the fit. Replicates are
    centred again afterwards, like every strength vector here.
    """
    a, b = np.asarray(a_idx, dtype=np.int64), np.asarray(b_idx, dtype=np.int64)
    credit_a, credit_b = vote_credits(outcome, tie_mode=tie_mode, bothbad_mode=bothbad_mode)
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    cell, _ = _dense(row_code.astype(np.int64) * n_cols + col_code)
    table = sp.coo_matrix((np.concatenate([credit_a, credit_b]),
                           (np.concatenate([cell, cell]),
                            np.concatenate([a * n_models + b, b * n_models + a]))),
                          shape=(cell.max() + 1, n_models * n_models)).tocsr()
    table.eliminate_zeros()  # a decisive vote's loser credit: no work in the product
    first = _first_index(cell)
    totals = pigeonhole_totals(row_code[first], col_code[first], table, B, rng)
    fit = bt_fit(np.asarray(table.sum(axis=0)).reshape(n_models, n_models), alpha=alpha)
    reps = bt_fit_many(totals.reshape(B, n_models, n_models), alpha=alpha, start=fit)
    z = _bt_influence(fit, a, b, credit_a, credit_b, alpha)
    variance = influence_variance(row_code, col_code, z, z != 0)
    scaled = _calibrate(reps, fit, variance, level)
    return scaled - scaled.mean(axis=1, keepdims=True)  # per-model factors moved the centre


def _bt_influence(theta, a, b, credit_a, credit_b, alpha) -> np.ndarray:
    """Per vote ``H^+ g``: ``g`` is the gradient of its log-likelihood term
    ``(credit_a - games * p) (e_a - e_b)``, ``H`` the penalised information."""
    m = theta.size
    games = credit_a + credit_b
    p = expit(theta[a] - theta[b])
    rows = np.arange(a.size)
    diff = sp.csr_matrix((np.concatenate([np.ones(a.size), -np.ones(a.size)]),
                          (np.concatenate([rows, rows]), np.concatenate([a, b]))),
                         shape=(a.size, m))
    info = (diff.T @ diff.multiply((games * p * (1 - p))[:, None])).toarray()
    info += 2 * alpha * np.eye(m)
    return np.asarray(diff.multiply((credit_a - games * p)[:, None]) @ np.linalg.pinv(info))


def unique_codes(codes, return_inverse: bool = False):
    """The sorted distinct values of integer ``codes`` and, with
    ``return_inverse``, each code's position among them: what ``np.unique``
    returns. Non-negative codes in a narrow range (rater, case and cell
    codes) are marked in a table over that range instead of sorted: linear
    time, several times faster on hundreds of thousands of codes. The table
    takes a byte per slot, and four more for the positions, within
    :data:`_TABLE_BYTES` per code (about what sorting takes). Other codes
    are sorted (numpy 2.4's ``np.unique`` without ``return_*`` takes a
    hashing path about 100x slower than sorting wide integers, so not that)."""
    codes = np.asarray(codes, dtype=np.int64).ravel()
    slot_bytes = 5 if return_inverse else 1
    if codes.size and codes.min() >= 0 and codes.max() * slot_bytes < _TABLE_BYTES * codes.size:
        seen = np.zeros(int(codes.max()) + 1, dtype=bool)
        seen[codes] = True
        values = np.flatnonzero(seen)
        if not return_inverse:
            return values
        rank = np.cumsum(seen, dtype=np.int32) - 1
        return values, rank[codes].astype(np.int64)
    if return_inverse:
        values, inverse = np.unique(codes, return_inverse=True)
        return values, inverse.ravel()
    ordered = np.sort(codes)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size \
        else ordered


def _first_index(codes) -> np.ndarray:
    """Where each distinct code first occurs, in code order:
    ``np.unique(codes, return_index=True)[1]``, by the same stable sort,
    of 16-bit keys (a radix sort) when the codes fit."""
    codes = np.asarray(codes)
    if codes.size and codes.min() >= 0 and codes.max() < 2**16:
        codes = codes.astype(np.uint16)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.ones(ordered.size, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    return order[starts]


def _dense(codes) -> tuple[np.ndarray, int]:
    """Codes renumbered 0..G-1 over the values that occur, and G."""
    values, inverse = unique_codes(codes, return_inverse=True)
    return inverse, values.size


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
