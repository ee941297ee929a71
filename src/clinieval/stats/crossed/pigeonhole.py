"""The pigeonhole bootstrap's replicates: rows (raters) and columns
(cases) drawn with replacement, cell weights ``U[row] * V[col]`` on
sufficient statistics, vectorised over replicates. The draws' order fixes
the numbers: rows then columns, chunk after chunk, whatever path sums them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from clinieval.stats.bootstrap import resample_counts
from clinieval.stats.crossed.codes import _dense

# Pigeonhole cell weights per pass (4 MB as float32): the weights are written,
# multiplied by the column weights and read by the product, so passes that
# stay in cache are faster (about a third less time for the votes' cells,
# with two entries each, and a sixth for the ratings' cells, at paper scale).
_WEIGHT_BUDGET = 2**20
_MIN_CHUNK = 64  # replicates per pass over the cells, at least
_LANE_PASS = 256  # replicates per pass of the 16-bit lanes (several chunks of draws)
_LANE_BYTES = 2**20  # 16-bit cell weights per pass over a block of cells, in bytes
_LANE_TOTAL = 2**12  # statistics' totals below this leave 16-bit lanes room for the weights


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
