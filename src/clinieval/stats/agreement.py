"""Inter-rater agreement and dispersion from item-by-category counts.

All functions take ``counts``, an ``(items, categories)`` matrix whose entry
``[u, c]`` is how many raters put item ``u`` in category ``c`` (build it with
:func:`category_counts`). Items may have different numbers of ratings; items
with fewer than two ratings carry no information about agreement and are
left out.
"""

from __future__ import annotations

import numpy as np

from clinieval.stats.bootstrap import merge_identical_rows

LEVELS = ("nominal", "ordinal", "interval")


def category_counts(item_idx, category_idx, n_items: int, n_categories: int) -> np.ndarray:
    """``(n_items, n_categories)`` counts from one (item, category) pair per rating."""
    item = np.asarray(item_idx, dtype=np.int64)
    cat = np.asarray(category_idx, dtype=np.int64)
    flat = np.bincount(item * n_categories + cat, minlength=n_items * n_categories)
    return flat.reshape(n_items, n_categories)


def _pairable(counts, weights=None):
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or np.any(counts < 0):
        raise ValueError("counts must be a non-negative (items, categories) matrix")
    weights = np.ones((1, counts.shape[0])) if weights is None else np.asarray(
        weights, dtype=float)
    if weights.ndim != 2 or weights.shape[1] != counts.shape[0]:
        raise ValueError(f"weights must be (replicates, {counts.shape[0]} items),"
                         f" got {weights.shape}")
    keep = counts.sum(axis=1) >= 2
    if keep.all():  # the usual case: skip copying a (replicates, items) matrix
        return counts, weights
    return counts[keep], weights[:, keep]


def fleiss_kappa(counts) -> float:
    """Fleiss' kappa (Fleiss, 1971, Psychol. Bull. 76:378) for varying raters.

    Generalisation to a varying number of ratings ``n_u`` per item: each item's
    observed agreement is the share of agreeing ordered rater pairs,
    ``P_u = (sum_c n_uc**2 - n_u) / (n_u (n_u - 1))``, and ``P_bar`` is their
    unweighted mean over items; chance agreement ``P_e = sum_c p_c**2`` uses
    the category shares ``p_c`` over all ratings of those items. With a
    constant ``n_u`` this is exactly Fleiss' statistic. NaN when ``P_e = 1``
    (every rating in one category) or no item has two ratings.
    """
    return float(fleiss_kappa_weighted(*_merged(counts))[0])


def fleiss_kappa_weighted(counts, weights) -> np.ndarray:
    """:func:`fleiss_kappa` once per row of ``weights`` ``(R, items)``.

    Item ``u`` counts ``weights[r, u]`` times in replicate ``r`` (an item
    bootstrap passes the resampled multiplicities of distinct items, see
    :func:`clinieval.stats.resample_counts`). ``None`` weighs every item once.
    Returns ``(R,)`` values, NaN where undefined.
    """
    counts, w = _pairable(counts, weights)
    n = counts.sum(axis=1)
    agree = (np.sum(counts**2, axis=1) - n) / (n * (n - 1))
    # One product gives the agreement sum, the category totals and the item
    # count of every replicate.
    sums = w @ np.column_stack([agree, counts, np.ones(len(counts))])
    total, by_category = sums[:, -1], sums[:, 1:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_bar = sums[:, 0] / total
        p_e = np.sum((by_category / by_category.sum(axis=1, keepdims=True)) ** 2, axis=1)
        kappa = (p_bar - p_e) / (1.0 - p_e)
    return np.where((total > 0) & (p_e < 1.0), kappa, np.nan)


def krippendorff_alpha(counts, level: str = "ordinal", values=None) -> float:
    """Krippendorff's alpha from the value-by-unit count matrix.

    Coincidences (Krippendorff, *Content Analysis*, 4th ed., 2019, §12.2):
    ``o_ck = sum_u (n_uc n_uk - [c = k] n_uc) / (n_u - 1)`` over units with
    ``n_u >= 2``; ``alpha = 1 - D_o / D_e`` with
    ``D_o = sum o_ck d2_ck / n`` and ``D_e = sum n_c n_k d2_ck / (n (n - 1))``.
    Columns must be in ascending value order; ``values`` (default
    ``0..K-1``) are only used by the interval metric ``(v_c - v_k)**2``. The
    ordinal metric is :func:`ordinal_distance`. NaN when there is no expected
    disagreement.
    """
    return float(krippendorff_alpha_weighted(*_merged(counts), level, values)[0])


def _merged(counts):
    """Distinct count rows weighted by their frequency: the same statistic,
    at a cost per distinct pattern instead of per item."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return counts, None
    patterns, freq = merge_identical_rows(counts)
    return patterns, freq[None].astype(float)


def krippendorff_alpha_weighted(counts, weights, level: str = "ordinal",
                                values=None) -> np.ndarray:
    """:func:`krippendorff_alpha` once per row of unit ``weights`` ``(R, units)``
    (same weighting as :func:`fleiss_kappa_weighted`): the coincidence matrix
    of replicate ``r`` is the ``weights[r]``-weighted sum of the units' own."""
    counts, w = _pairable(counts, weights)
    k = counts.shape[1]
    m_u = counts.sum(axis=1)
    per_unit = (counts[:, :, None] * counts[:, None, :]
                - np.eye(k) * counts[:, :, None]) / (m_u - 1.0)[:, None, None]
    coincidence = (w @ per_unit.reshape(len(counts), k * k)).reshape(-1, k, k)
    n_c = coincidence.sum(axis=2)
    n = n_c.sum(axis=1)
    d2 = _distance(level, n_c, values)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.sum(coincidence * d2, axis=(1, 2)) / n
        expected = np.sum(n_c[:, :, None] * n_c[:, None, :] * d2, axis=(1, 2)) / (n * (n - 1.0))
        alpha = 1.0 - observed / expected
    return np.where(expected > 0, alpha, np.nan)


def ordinal_distance(n_c) -> np.ndarray:
    """Krippendorff's squared ordinal distance between categories ``c`` and ``k``:
    ``(sum_{g=c..k} n_g - (n_c + n_k) / 2) ** 2`` from the category totals
    ``n_c`` (ascending order). ``n_c`` of shape ``(..., K)`` gives ``(..., K, K)``."""
    n_c = np.asarray(n_c, dtype=float)
    k = n_c.shape[-1]
    cum = np.concatenate([np.zeros(n_c.shape[:-1] + (1,)), np.cumsum(n_c, axis=-1)], axis=-1)
    idx = np.arange(k)
    lo, hi = np.minimum.outer(idx, idx), np.maximum.outer(idx, idx)
    between = cum[..., hi + 1] - cum[..., lo]
    return (between - (n_c[..., :, None] + n_c[..., None, :]) / 2.0) ** 2


def _distance(level, n_c, values):
    k = n_c.shape[-1]
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "interval":
        v = np.arange(k, dtype=float) if values is None else np.asarray(values, dtype=float)
        if v.shape != (k,):
            raise ValueError(f"need one value per count column ({k}), got {v.shape}")
        return (v[:, None] - v[None, :]) ** 2
    if level == "ordinal":
        return ordinal_distance(n_c)
    raise ValueError(f"level must be one of {LEVELS}, got {level!r}")


def within_item_std(counts, values, ddof: int = 1) -> np.ndarray:
    """Standard deviation of the scores within each item; NaN below 2 ratings.

    ``counts`` is ``(..., K)`` (e.g. answers x criteria x score values); the
    result has the leading shape.

    ``ddof=1`` (default) is the sample standard deviation, the usual
    per-answer dispersion summary (and pandas' default); ``ddof=0`` gives the
    population form.
    """
    counts = np.asarray(counts, dtype=float)
    v = np.asarray(values, dtype=float)
    n = counts.sum(axis=-1)
    ok = n >= 2
    safe = np.where(ok, n, 2.0)
    total = counts @ v
    # Sum of squares from the first two moments: two matrix products and no
    # (..., K) temporary, which matters for millions of answers x criteria.
    # Clipping removes the rounding error of the difference (never negative).
    ss = np.clip(counts @ v**2 - total**2 / safe, 0.0, None)
    return np.where(ok, np.sqrt(ss / (safe - ddof)), np.nan)


def mean_within_item_std(counts, values, ddof: int = 1) -> float:
    """Mean of :func:`within_item_std` over items with at least 2 ratings."""
    std = within_item_std(counts, values, ddof)
    return float(np.mean(std[~np.isnan(std)])) if np.any(~np.isnan(std)) else float("nan")
