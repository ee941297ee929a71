"""Nonparametric bootstrap on sufficient statistics.

Every resampler here draws *counts* instead of indices: resampling ``n``
units with replacement is the same as one multinomial draw of ``n`` over the
distinct unit values with probabilities equal to their observed shares
(Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 6). For a
rubric score with five possible values that is a draw over five counts, so
the cost does not grow with the number of ratings.

Replicates are always returned with the replicate axis first: ``(B, ...)``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_ELEMENT_BUDGET = 2**22  # integers per chunk of draws (32 MB as int64)
_DRAW_BUDGET = 2**18  # index draws per chunk: small arrays are reused instead of freshly paged in
_STAGE_BYTES = 2**25  # bytes of counts staged before a block of columns is written (by unit)
_BINOMIAL_DRAWS = 30  # a binomial of a multinomial draw costs about this many index draws
_SHARED_ENTRY = 0.1  # an item's weight added into one grouping's counts, in index draws
_SHARED_PASS = 4  # chunks of draws per product pass of a shared resample
_SHORT_COUNTS = 2**16  # items below which shared resample counts are summed in 16 bits
_PATTERN_SLOTS = 40  # table slots per row up to which identical rows are merged by a table
_PATTERN_TABLE = 2**21  # and at most this many (17 bytes each while merging)


def percentile_ci(samples, level: float = 0.95, axis: int = 0):
    """Percentile interval (Efron & Tibshirani, 1993, §13.3) of replicates.

    Returns ``(lower, upper)``, the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles along ``axis`` with numpy's default linear interpolation. Any
    NaN replicate makes that interval NaN.
    """
    tail = (1.0 - level) / 2.0
    bounds = np.quantile(np.asarray(samples, dtype=float), [tail, 1.0 - tail], axis=axis)
    return bounds[0], bounds[1]


def resample_counts(freq, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, P)`` counts of each of ``P`` distinct units in ``B`` resamples.

    Unit ``p`` occurs ``freq[p]`` times among ``n = sum(freq)``; each row
    resamples ``n`` units with replacement, a multinomial draw. A binomial
    of that draw costs as much as :data:`_BINOMIAL_DRAWS` index draws, so
    the frequent units get one each, while the rare ones are pooled: one
    multinomial draw over the frequent units and the pool, then the pool's
    total spread over its units by uniform index draws. Given its total, the
    pool's counts are multinomial with the units' shares within it, so the
    result has exactly the resampling distribution.
    """
    freq = np.asarray(freq, dtype=np.int64)
    n = int(freq.sum())
    if n == 0:
        return np.zeros((B, freq.size), dtype=np.int64)
    alone, pooled = _split_frequent(freq)
    if alone.size == 0:
        return _spread(freq, np.full(B, n), rng)
    totals = rng.multinomial(n, np.append(freq[alone], freq[pooled].sum()) / n, size=B)
    out = np.zeros((B, freq.size), dtype=np.int64)
    out[:, alone] = totals[:, :-1]
    if pooled.size:
        out[:, pooled] = _spread(freq[pooled], totals[:, -1], rng)
    return out


def _split_frequent(freq) -> tuple[np.ndarray, np.ndarray]:
    """Units drawn alone (the most frequent ones, as many as minimise
    binomials times their cost plus pooled index draws) and pooled units."""
    order, cost = _split_costs(freq)
    k = int(np.argmin(cost))
    return order[:k], order[k:]


def _split_costs(freq) -> tuple[np.ndarray, np.ndarray]:
    """Units by falling frequency and, for each number of them drawn alone,
    the cost of one resample in index draws."""
    freq = np.asarray(freq, dtype=np.int64)
    order = np.argsort(-freq, kind="stable")
    order = order[freq[order] > 0]
    pooled_draws = freq[order].sum() - np.concatenate([[0], np.cumsum(freq[order])])
    return order, _BINOMIAL_DRAWS * np.arange(order.size + 1) + pooled_draws


def unit_counts(n: int, B: int, rng: np.random.Generator, dtype=np.int64,
                by_unit: bool = False) -> np.ndarray:
    """``(B, n)`` counts of ``n`` distinct units in ``B`` resamples of them
    (``(n, B)`` with ``by_unit``), written straight into ``dtype``: the same
    draws as :func:`resample_counts` of ``n`` units seen once (index draws
    and an offset bincount per chunk of replicates, as :func:`_spread`), so
    the counts are those of :func:`pigeonhole_weights`. A narrow ``dtype``
    (8- or 16-bit counts, float32 weights) moves less memory than 64-bit
    counts and their conversion; an integer ``dtype`` too narrow for a count
    drawn is widened (to 16, then 64 bits) before it is written, so no count
    wraps (a unit drawn 256 times of ``n`` is all but impossible for large
    ``n``, but not for small)."""
    out = np.empty((n, B) if by_unit else (B, n), dtype=dtype)
    if n == 0:
        return out
    chunk = max(1, _DRAW_BUDGET // n)
    # by unit, replicates are staged as rows and written a block of columns at
    # a time: a column alone is a write per unit a row apart (at 100x, 1.4 M
    # answers x 1,000 replicates of such writes took 15 s)
    rows = _STAGE_BYTES // (n * np.dtype(dtype).itemsize)
    stage = np.empty((min(B, max(chunk, rows)), n), dtype=dtype) if by_unit else None
    staged = 0
    for start in range(0, B, chunk):
        k = min(chunk, B - start)
        picks = rng.integers(0, n, size=k * n)
        if k > 1:
            picks += np.repeat(np.arange(k) * n, n)
        counts = np.bincount(picks, minlength=k * n).reshape(k, n)
        if out.dtype.kind in "iu" and counts.max() > np.iinfo(out.dtype).max:
            out = out.astype(np.uint16 if counts.max() < 2**16 else np.int64)
            stage = None if stage is None else stage.astype(out.dtype)
        if not by_unit:
            out[start:start + k] = counts
            continue
        if staged + k > stage.shape[0]:
            out[:, start - staged:start] = stage[:staged].T
            staged = 0
        stage[staged:staged + k] = counts
        staged += k
    if by_unit and staged:
        out[:, B - staged:] = stage[:staged].T
    return out


def shared_resample_cheaper(freqs) -> bool:
    """Whether one resample of ``n`` items shared by several groupings of
    them (:func:`resample_shared_counts`) costs less than a
    :func:`resample_counts` of each grouping's distinct-unit frequencies
    ``freqs`` on its own: ``n`` index draws plus a sparse product entry per
    item and grouping, against each grouping's binomials and pooled draws."""
    freqs = [np.asarray(f, dtype=np.int64) for f in freqs]
    n = int(freqs[0].sum()) if freqs else 0
    if len(freqs) < 2 or n == 0 or n >= 2**24:  # float32 counts exact below 2**24
        return False
    alone = sum(float(_split_costs(f)[1].min()) for f in freqs)
    return n * (1.0 + _SHARED_ENTRY * len(freqs)) < alone


def resample_shared_counts(codes, sizes, B: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``(B, sizes[j])`` counts per grouping ``j`` of ``n`` items in ``B``
    resamples of the items shared by every grouping.

    ``codes`` is ``(n, J)``: item ``u`` is unit ``codes[u, j]`` (of
    ``sizes[j]``) of grouping ``j``. Each replicate resamples the ``n`` items
    with replacement once (uniform index draws and a bincount) and
    adds each item's multiplicity into its unit of every grouping by one
    sparse product. Every grouping's counts are then the multinomial of
    :func:`resample_counts` over its units' frequencies (the same
    distribution), and the groupings see the same resampled items.
    """
    codes = np.asarray(codes, dtype=np.int64)
    n, J = codes.shape
    sizes = np.asarray(sizes, dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)])
    # A unit's count is at most n: below 2**16 the product runs in 16-bit
    # integers (exact, and about twice as fast as float32), else in float32
    # (exact below 2**24, see shared_resample_cheaper).
    dtype = np.uint16 if n < _SHORT_COUNTS else np.float32
    # (units of all groupings x items), column-compressed: J entries per item.
    units = sp.csc_matrix((np.ones(n * J, dtype=dtype),
                           (codes + offset[:-1]).ravel(), np.arange(0, n * J + 1, J)),
                          shape=(int(offset[-1]), n))
    out = np.empty((B, int(offset[-1])), dtype=np.int64)
    # Draws and bincounts in chunks that stay in cache; the product takes
    # several chunks at a time (it is faster per replicate the more it takes).
    chunk = max(1, _DRAW_BUDGET // max(n, 1))
    shift = np.repeat(np.arange(0, n * chunk, n), n)
    width = chunk * _SHARED_PASS
    weights = np.empty((n, min(width, B)), dtype=dtype)
    for first in range(0, B, width):
        last = min(first + width, B)
        for start in range(first, last, chunk):
            size = min(chunk, last - start)
            picks = rng.integers(0, n, size=size * n)
            picks += shift[: size * n]  # replicate-major: a replicate's counts stay in cache
            weights[:, start - first : start - first + size] = np.bincount(
                picks, minlength=n * size).reshape(size, n).T
        out[first:last] = (units @ weights[:, : last - first]).T
    return [out[:, offset[j] : offset[j + 1]] for j in range(J)]


def _spread(freq, totals, rng: np.random.Generator) -> np.ndarray:
    """``(B, P)`` counts: row ``b`` draws ``totals[b]`` of the ``sum(freq)``
    units uniformly with replacement, unit ``p`` standing for ``freq[p]``
    of them. One offset bincount per chunk of replicates of about
    :data:`_DRAW_BUDGET` draws (one large bincount over all draws, or one
    per replicate, is slower)."""
    unit = None if np.all(freq == 1) else np.repeat(np.arange(freq.size), freq)
    size = freq.size if unit is None else unit.size
    out = np.empty((totals.size, freq.size), dtype=np.int64)
    chunk = max(1, _DRAW_BUDGET // size)
    for start in range(0, totals.size, chunk):
        part = totals[start : start + chunk]
        picks = rng.integers(0, size, size=int(part.sum()))
        if unit is not None:
            picks = unit[picks]
        if part.size > 1:  # one replicate (a chunk of many units) needs no offsets
            picks += np.repeat(np.arange(part.size) * freq.size, part)
        out[start : start + part.size] = np.bincount(
            picks, minlength=part.size * freq.size).reshape(part.size, freq.size)
    return out


def bootstrap_mean_counts(counts, values, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, ...)`` bootstrap means from ``(..., K)`` counts of ``K`` values.

    Each row's ``n`` ratings are resampled as one multinomial draw of ``n``
    over the ``K`` values with the row's observed shares, the same
    distribution as resampling the individual ratings. Rows with ``n = 0``
    give NaN.
    """
    counts = np.asarray(counts, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    n = counts.sum(axis=-1)
    shares = counts / np.maximum(n, 1)[..., None]
    shares[n == 0] = 1.0 / counts.shape[-1]
    chunk = max(1, _ELEMENT_BUDGET // max(counts.size, 1))
    means = np.concatenate(
        [
            rng.multinomial(n, shares, size=(min(chunk, B - s),) + n.shape) @ values
            for s in range(0, B, chunk)
        ]
    )
    return np.where(n > 0, means / np.maximum(n, 1), np.nan)


def bootstrap_mean(values, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` bootstrap means of ``values`` (1-D): each replicate draws
    ``values.size`` of them with replacement, as counts of the distinct
    values (:func:`resample_counts`, the same distribution; a clinician
    pair's Macro-F1 takes 350 values over 100,000 pairs at 10x, whose index
    draws took 4.7 s and 0.8 GB of a 10x audit)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return np.full(B, np.nan)
    distinct, freq = np.unique(values, return_counts=True)
    return (resample_counts(freq, B, rng) @ distinct) / values.size


def bootstrap_pooled_sd(variances, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B,)`` bootstrap replicates of a pooled SD, ``sqrt(mean(variances))``,
    with the units (one variance each) resampled as in :func:`bootstrap_mean`."""
    return np.sqrt(bootstrap_mean(variances, B, rng))


def bootstrap_proportion_counts(k, n, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, ...)`` bootstrap proportions: ``Binomial(n, k / n) / n`` draws.

    Resampling ``n`` binary outcomes with ``k`` successes. ``n = 0`` gives NaN.
    """
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    p = k / np.maximum(n, 1)
    draws = rng.binomial(n, p, size=(B,) + np.broadcast_shapes(k.shape, n.shape))
    return np.where(n > 0, draws / np.maximum(n, 1), np.nan)


def cluster_bootstrap_ratio(sums, ns, B: int, rng: np.random.Generator) -> np.ndarray:
    """Cluster bootstrap of a ratio mean ``sum(sums) / sum(ns)``.

    ``sums`` and ``ns`` are per-cluster totals and counts, shape ``(C,)`` or
    ``(C, R)`` for ``R`` quantities sharing the clusters. Each replicate
    resamples the ``C`` clusters with replacement (Davison & Hinkley,
    *Bootstrap Methods and their Application*, 1997, §3.8) as multinomial
    weights ``w`` and returns ``(w @ sums) / (w @ ns)``, shape ``(B,)`` or
    ``(B, R)``; NaN where a replicate has no observations.

    Identical clusters are merged first (exact: their weights add up), so
    clusters with few possible ``(sum, n)`` values cost little however many
    there are; draws are made in chunks over ``B`` to bound memory.
    """
    sums, ns = np.asarray(sums, dtype=float), np.asarray(ns, dtype=float)
    flat = sums.ndim == 1
    if sums.shape[0] == 0:
        return np.full((B,) + sums.shape[1:], np.nan)
    patterns, freq = merge_identical_rows(np.column_stack([sums, ns]))
    half = patterns.shape[1] // 2
    num, den = patterns[:, :half], patterns[:, half:]
    chunk = max(1, _ELEMENT_BUDGET // freq.size)
    reps = []
    for start in range(0, B, chunk):
        w = resample_counts(freq, min(chunk, B - start), rng).astype(float)
        top, bottom = w @ num, w @ den
        reps.append(np.divide(top, bottom, out=np.full_like(top, np.nan), where=bottom > 0))
    out = np.concatenate(reps)
    return out[:, 0] if flat else out


def merge_identical_rows(matrix, return_inverse: bool = False):
    """Distinct rows of ``matrix`` (in a fixed order) and how often each occurs;
    with ``return_inverse`` also each row's index among the distinct rows.

    Merging identical units before a bootstrap is exact: their resampled
    multiplicities add up.
    """
    matrix = np.asarray(matrix)
    if matrix.dtype.kind in "iu" and matrix.size and matrix.min() >= 0:
        base = int(matrix.max()) + 1
        if base ** matrix.shape[1] < 2**62:  # one mixed-radix code per row fits int64
            powers = base ** np.arange(matrix.shape[1], dtype=np.int64)
            code = matrix.astype(np.int64) @ powers
            slots = base ** matrix.shape[1]
            if slots <= min(_PATTERN_SLOTS * matrix.shape[0], _PATTERN_TABLE):
                # Few possible codes (score counts of a few raters): count them
                # in a table over the range instead of sorting. The distinct
                # codes come out in the same ascending order, and each row is
                # its code's digits.
                count = np.bincount(code, minlength=slots)
                values = np.flatnonzero(count)
                patterns = (values[:, None] // powers % base).astype(matrix.dtype, copy=False)
                if return_inverse:
                    return patterns, count[values], (np.cumsum(count > 0) - 1)[code]
                return patterns, count[values]
            if return_inverse:
                _, first, inverse, freq = np.unique(code, return_index=True,
                                                    return_inverse=True, return_counts=True)
                return matrix[first], freq, inverse
            _, first, freq = np.unique(code, return_index=True, return_counts=True)
            return matrix[first], freq
    # Coding each column with a 1-D np.unique and combining the codes is much
    # faster than np.unique(axis=0) on a million rows.
    key = np.zeros(matrix.shape[0], dtype=np.int64)
    for column in matrix.T:
        _, code = np.unique(column, return_inverse=True)
        _, key = np.unique(key * (code.max() + 1) + code, return_inverse=True)
    representative = np.empty(key.max() + 1, dtype=np.int64)
    representative[key] = np.arange(key.size)
    if return_inverse:
        return matrix[representative], np.bincount(key), key
    return matrix[representative], np.bincount(key)
