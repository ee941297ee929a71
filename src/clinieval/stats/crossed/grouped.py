"""Two-way variances from bincounts over runs of entries, for statistics
too many to hold a cells x statistics influence matrix (100x paper scale):
per-group ratio means of counts, means of per-unit values and shares of
flagged answers. Every fast path adds the same terms in the same order as
the general one, so the results are the same bits.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from clinieval.stats.crossed.codes import _dense, unique_codes
from clinieval.stats.crossed.variance import CrossedVariance, _combine, _small_sample

_BIN_BUDGET = 2**25  # cluster x group bins per pass of a grouped variance
_DENSE_BINS = 2**21  # cluster x group bins up to which grouped variances bincount them
_PROBE = 2**16  # runs whose order and groups decide quickly against a fast path


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
    counted over the units where ``counted`` holds.

    ``twoway`` is ``(S_R + S_C - S_K) / keep`` (the raw sums of squared rater,
    case and cell totals, no ``G / (G - 1)`` factors), never below the one-way
    case variance ``v_cols``. ``keep`` undoes the centring of the influences
    at the estimate rather than at the truth. Write a unit's deviation as
    ``e_i = (y_i - mu) - (mean - mu)``; to first order ``E[e_i e_l] = C_il -
    Var(mean)``, so every product a sum adds is short of its covariance by
    ``Var(mean)``. With ``w_i = 1 / n`` a unit's weight, a rater's sum of
    squares lacks ``W_j^2 Var(mean)`` (``W_j`` the weights of the units it
    rated, each unit once per distinct rater), a case's ``w_c^2 Var(mean)``
    and a cell's ``w_k^2 Var(mean)``, so the raw two-way sum estimates ``keep
    * Var(mean)`` with ``keep = 1 - (sum_j W_j^2 + sum_c w_c^2 - sum_k
    w_k^2)``. With one rater per unit and one unit per case the case and cell
    terms cancel and ``keep`` is ``1 - sum_j (n_j / n)^2`` for raters with
    ``n_j`` units each: ``1 / keep`` is the old ``R / (R - 1)`` exactly when
    every rater has as many units (one each, say), and a little more otherwise
    (raters with 12, 10 and 8 of 30 units: 1.520 against 1.5). But a rater's
    units all carry its leniency, so when each rater judges many units of a
    group the loss is large: with 800 answers of a model shared by 60 raters,
    three each, ``sum_j W_j^2`` is 0.15, of which the raters' ``G / (G - 1)``
    gives back only about a third (1 / per-unit raters); the variance averaged
    0.89-0.96 of the estimates' own and 95% intervals of dangerous answers
    covered 92-93% (``benchmarks/coverage.py --per-rater``). ``keep`` is at
    least 0.5 (an arbitrary bound): where a unit's raters are a large share of
    all raters the rater part is barely estimable and the one-way floor
    carries the variance. The one-way fields keep their ``G / (G - 1)``
    factors."""
    groups = np.asarray(groups, dtype=np.int64)
    units = np.flatnonzero(counted)
    piece_unit = np.asarray(piece_unit, dtype=np.int64)
    pieces = counted[piece_unit]
    every = bool(pieces.all())  # then no masked copies of the pieces (37.5 M at 100x)
    unit = piece_unit if every else piece_unit[pieces]
    # each counted unit's weight in its group's mean, 1 / n
    n_counted = np.bincount(groups[units], minlength=n_groups).astype(float)
    scale = np.where(n_counted > 0, 1.0 / np.maximum(n_counted, 1.0), 0.0)
    case_code = _bin_codes(np.asarray(unit_case)[units])
    s_cols, g_cols = _run_squares(case_code, groups[units], z[units], n_groups)
    w_cols = _run_squares(case_code, groups[units], scale[groups[units]], n_groups)[0]
    del case_code
    piece_group, piece_z = groups[unit], z[unit]
    del unit
    piece_w = scale[piece_group]
    rater_code = _bin_codes(np.asarray(piece_rater) if every else
                            np.asarray(piece_rater)[pieces])
    s_rows, g_rows = _run_squares(rater_code, piece_group, piece_z, n_groups)
    w_rows = _run_squares(rater_code, piece_group, piece_w, n_groups)[0]
    del rater_code
    if unique_codes(np.asarray(unit_case, dtype=np.int64)[units] * n_groups
                    + groups[units]).size == units.size:
        # No two units of a group share a case, so a (rater, case) cell holds
        # at most one piece of a group (one piece per rater and unit): the
        # cells' totals are the pieces' own influences.
        s_cells = np.bincount(piece_group, weights=np.square(piece_z), minlength=n_groups)
        w_cells = np.bincount(piece_group, weights=np.square(piece_w), minlength=n_groups)
        g_cells = np.bincount(piece_group, minlength=n_groups)
    else:
        cell_code = _bin_codes(np.asarray(piece_cell) if every else
                               np.asarray(piece_cell)[pieces])
        s_cells, g_cells = _run_squares(cell_code, piece_group, piece_z, n_groups)
        w_cells = _run_squares(cell_code, piece_group, piece_w, n_groups)[0]
    v_rows, v_cols = _small_sample(g_rows) * s_rows, _small_sample(g_cols) * s_cols
    v_cells = _small_sample(g_cells) * s_cells
    keep = np.maximum(1.0 - (w_rows + w_cols - w_cells), 0.5)
    twoway = np.maximum((s_rows + s_cols - s_cells) / keep, v_cols)
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
