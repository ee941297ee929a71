"""Models compared over many benchmarks (MedHELM): win rates and
macro-averages of per-benchmark scores, and their bootstrap replicates.

A table is ``(..., M, K)``: the normalised (0-1) score of ``M`` models on
``K`` benchmarks, NaN where a model has no score; leading axes are
replicates. On each benchmark every model meets every other model once.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from clinieval.stats.scoring import bootstrap_case_means

TieRule = Literal["half", "geq"]
TIE_RULES = {"half": "a tie counts half a win for each model",
             "geq": "a tie counts a win for both models (MedHELM's wording: a win when the"
                    " score is >= the rival's)"}


def win_shares(table, ties: TieRule = "half") -> tuple[np.ndarray, np.ndarray]:
    """``(win_rate (..., M), per_benchmark (..., M, K))``: the share of
    (benchmark, rival) meetings each model won, overall and per benchmark.

    A higher score wins; a tie earns 0.5 (``"half"``) or 1 (``"geq"``).
    Meetings where either model has no score are left out.
    """
    s = np.asarray(table, dtype=float)
    a, b = s[..., :, None, :], s[..., None, :, :]
    tie = 0.5 if ties == "half" else 1.0
    with np.errstate(invalid="ignore"):
        credit = np.where(a > b, 1.0, np.where(a == b, tie, 0.0))
    valid = ~np.isnan(a) & ~np.isnan(b) & ~np.eye(s.shape[-2], dtype=bool)[:, :, None]
    earned = (credit * valid).sum(axis=-2)
    met = valid.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return earned.sum(axis=-1) / met.sum(axis=-1), earned / met


def macro_average(table) -> np.ndarray:
    """Mean over benchmarks, each weighted equally, per model: ``(..., M)``."""
    s = np.asarray(table, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(s, axis=-1) / (~np.isnan(s)).sum(axis=-1)


def instance_replicates(blocks, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, M, K)`` bootstrap replicates of the per-benchmark mean scores.

    ``blocks`` holds one ``(instances, M)`` array per benchmark (NaN where a
    model has no score on an instance). Each replicate resamples the
    instances of each benchmark with replacement, the same draw for every
    model (paired); a model's replicate mean is over its scored instances
    among those drawn. As in
    :func:`~clinieval.stats.scoring.paired_comparisons_many`, benchmarks with
    the same number of instances share one draw of counts, each on its own
    random order of instances.
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    n_models = blocks[0].shape[1]
    out = np.full((B, n_models, len(blocks)), np.nan)
    by_size: dict[int, list[int]] = {}
    for k, block in enumerate(blocks):
        by_size.setdefault(block.shape[0], []).append(k)
    for members in by_size.values():
        parts = []
        for k in members:
            block = blocks[k][rng.permutation(blocks[k].shape[0])]
            parts += [np.nan_to_num(block), (~np.isnan(block)).astype(float)]
        sums = bootstrap_case_means(np.hstack(parts), B, rng, dtype=np.float32)
        for i, k in enumerate(members):
            total = sums[:, (2 * i) * n_models:(2 * i + 1) * n_models]
            scored = sums[:, (2 * i + 1) * n_models:(2 * i + 2) * n_models]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, :, k] = np.where(scored > 0, total / scored, np.nan)
    return out


def resample_benchmarks(replicates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each replicate table with its benchmarks drawn with replacement: the
    benchmarks are a sample of possible tasks, so a summary over them varies
    with which were chosen as well as with their instances."""
    B, _, K = replicates.shape
    picks = rng.integers(0, K, size=(B, K))
    return np.take_along_axis(replicates, picks[:, None, :], axis=2)
