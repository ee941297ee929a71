"""How far clinicians agree: reliability per criterion, dispersion,
consensus drift with prompt length, and each rater's leniency."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.stats import norm

from clinieval.audit.core import SCORES, Context
from clinieval.audit.result import Figure, Section
from clinieval.audit.tables import estimate, row_ci
from clinieval.stats import fleiss_kappa, krippendorff_alpha, resample_counts, spearman

MIN_ITEMS = 10
MIN_RATER_RATINGS = 20


def _std_within(counts: np.ndarray) -> np.ndarray:
    """Sample SD (ddof=1) of the scores within each item; NaN below 2 ratings."""
    n = counts.sum(axis=-1)
    total, squares = counts @ SCORES, counts @ SCORES**2
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (squares - total**2 / n) / (n - 1)
    return np.where(n >= 2, np.sqrt(np.clip(var, 0, None)), np.nan)


# --- 5. reliability ----------------------------------------------------------------


def reliability(ctx: Context) -> Section:
    title = "Inter-rater reliability"
    counts = ctx.answer_counts
    multi = counts.sum(axis=2) >= 2
    if multi.sum() < MIN_ITEMS:
        return Section("reliability", title, skipped="needs answers rated by at least two"
                       f" clinicians on a criterion; found {int(multi.sum())} such ratings sets.")
    rows = []
    for c in ctx.criteria:
        items = counts[multi[:, c], c].astype(np.int64)
        if len(items) < MIN_ITEMS:
            continue
        rows.append(_agreement_row(ctx, c, items))
    if not rows:
        return Section("reliability", title, skipped=f"no analysed criterion has {MIN_ITEMS}"
                       " answers rated by at least two clinicians.")
    frame = pd.DataFrame(rows)
    fig = Figure("reliability", "Fleiss' kappa by criterion", "bars", {
        "labels": frame["criterion"].tolist(), "est": frame["fleiss_kappa"].tolist(),
        "lo": frame["fleiss_kappa_lo"].tolist(), "hi": frame["fleiss_kappa_hi"].tolist(),
        "n": frame["n_items"].tolist(), "y_label": "Fleiss' kappa (5 categories)"},
        caption="Bootstrap CIs resample answers. 0 = chance agreement, 1 = perfect.")
    lo_row = frame.iloc[frame["fleiss_kappa"].argmin()]
    hi_row = frame.iloc[frame["fleiss_kappa"].argmax()]
    summary = (f"Agreement is highest on {hi_row['criterion']} (Fleiss kappa"
               f" {row_ci(hi_row, 'fleiss_kappa')}) and lowest on {lo_row['criterion']}"
               f" ({row_ci(lo_row, 'fleiss_kappa')}); an average over criteria would hide"
               " this.")
    return Section("reliability", title, summary,
                   {"agreement": frame}, [fig, _dispersion(ctx)],
                   {"kappa": dict(zip(frame["criterion"], frame["fleiss_kappa"], strict=True))})


def _agreement_row(ctx: Context, c: int, items: np.ndarray) -> dict:
    """Point estimates plus item-bootstrap CIs. Items with the same count
    pattern are merged and resampled as multinomial weights, so the cost is
    per distinct pattern, not per answer."""
    s = ctx.settings
    binary = np.column_stack([items[:, : ctx.fail_slots].sum(1), items[:, ctx.fail_slots:].sum(1)])
    patterns, freq = _distinct_rows(items)
    weights = resample_counts(freq, s.bootstrap, ctx.rng(f"reliability/{c}"))
    kappa_b = _weighted_fleiss(patterns, weights)
    alpha_b = _weighted_alpha(patterns, weights)
    bin_pat = np.column_stack([patterns[:, : ctx.fail_slots].sum(1),
                               patterns[:, ctx.fail_slots:].sum(1)])
    row = {"criterion": ctx.name(c), "n_items": len(items), "n_ratings": int(items.sum())}
    row |= _with_ci(ctx, "fleiss_kappa", fleiss_kappa(items), kappa_b)
    row |= _with_ci(ctx, "krippendorff_alpha_ordinal",
                    krippendorff_alpha(items, level="ordinal"), alpha_b)
    row |= _with_ci(ctx, "fail_kappa", fleiss_kappa(binary), _weighted_fleiss(bin_pat, weights))
    return row


def _distinct_rows(items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct count rows and their frequencies (a 1-D unique on a mixed-radix
    code, much faster than ``np.unique(axis=0)``)."""
    base = int(items.max()) + 1
    code = items.astype(np.int64) @ (base ** np.arange(items.shape[1], dtype=np.int64))
    _, first, freq = np.unique(code, return_index=True, return_counts=True)
    return items[first], freq


def _with_ci(ctx: Context, name: str, value: float, reps: np.ndarray) -> dict:
    lo, hi = ctx.ci(reps[np.isfinite(reps)]) if np.isfinite(reps).any() else (np.nan, np.nan)
    return {name: value, f"{name}_lo": lo, f"{name}_hi": hi}


def _weighted_fleiss(patterns: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Fleiss' kappa (variable-n form of :func:`clinieval.stats.fleiss_kappa`)
    for each row of item weights."""
    pat = patterns.astype(float)
    n = pat.sum(1)
    agree = (np.sum(pat**2, 1) - n) / (n * (n - 1))
    w = weights.astype(float)
    p_bar = (w @ agree) / w.sum(1)
    shares = (w @ pat) / (w @ n)[:, None]
    p_e = np.sum(shares**2, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (p_bar - p_e) / (1 - p_e)


def _weighted_alpha(patterns: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Ordinal Krippendorff's alpha for each row of item weights, from
    weighted coincidence matrices (same formulas as the stats module)."""
    pat = patterns.astype(float)
    n_u = pat.sum(1)
    k = pat.shape[1]
    per_item = (pat[:, :, None] * pat[:, None, :] - np.eye(k) * pat[:, :, None]) / (
        n_u - 1)[:, None, None]
    coincide = weights.astype(float) @ per_item.reshape(len(pat), k * k)
    coincide = coincide.reshape(-1, k, k)
    n_c = coincide.sum(2)
    n = n_c.sum(1)
    delta = _ordinal_delta(n_c)
    d_o = np.sum(coincide * delta, axis=(1, 2))
    d_e = np.sum(n_c[:, :, None] * n_c[:, None, :] * delta, axis=(1, 2)) / (n - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1 - d_o / d_e


def _ordinal_delta(n_c: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal distance for each replicate's marginals:
    (sum of n_g for g from c to k, minus half of n_c and n_k) squared."""
    cum = np.cumsum(n_c, axis=1)
    k = n_c.shape[1]
    lo = np.minimum.outer(np.arange(k), np.arange(k))
    hi = np.maximum.outer(np.arange(k), np.arange(k))
    before = np.where(lo > 0, np.take(cum, lo - 1, axis=1), 0.0) if k else 0
    span = np.take(cum, hi, axis=1) - before
    edge = (n_c[:, :, None] + n_c[:, None, :]) / 2
    return (span - edge) ** 2


def _dispersion(ctx: Context) -> Figure:
    d = ctx.data
    std = _std_within(ctx.answer_counts[:, ctx.criteria])
    ok = np.isfinite(std)
    values, n = [], []
    for m in range(d.n_models):
        rows = d.answer_model == m
        with np.errstate(invalid="ignore"):
            values.append([float(np.nanmean(std[rows, j])) if ok[rows, j].any() else None
                           for j in range(len(ctx.criteria))])
        n.append(ok[rows].sum(0).tolist())
    return Figure("dispersion", "Mean within-answer SD by model and criterion", "heatmap", {
        "rows": d.model_names, "cols": [ctx.name(c) for c in ctx.criteria], "values": values,
        "n": n, "value_label": "mean SD (score points)"},
        caption="Answers with at least two ratings; higher = clinicians disagree more.")


# --- 6. consensus drift ---------------------------------------------------------------


def consensus_drift(ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Consensus drift with prompt length"
    std = _std_within(ctx.answer_counts[:, ctx.criteria])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # answers with no multi-rated criterion
        disagreement = np.nanmean(std, axis=1)
    ok = np.isfinite(disagreement) & np.isfinite(d.answer_prompt_words)
    # Answers to one case share its prompt length: the unit is the case, with
    # the mean disagreement over its answers, so n and p are not inflated.
    cases = np.unique(d.answer_case[ok], return_inverse=True)[1]
    per_case = np.bincount(cases, minlength=cases.max() + 1 if cases.size else 0)
    if per_case.size < 2 * s.length_bins:
        return Section("consensus_drift", title, skipped="needs prompt lengths and answers rated"
                       f" by several clinicians; found {per_case.size} usable cases.")
    y = np.bincount(cases, weights=disagreement[ok]) / per_case
    x = np.bincount(cases, weights=d.answer_prompt_words[ok]) / per_case
    edges = np.unique(np.quantile(x, np.linspace(0, 1, s.length_bins + 1)))
    bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    z = norm.isf((1 - s.level) / 2)
    rows = []
    for b in range(len(edges) - 1):
        v = y[bins == b]
        se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
        rows.append({"words_from": edges[b], "words_to": edges[b + 1], "n": len(v),
                     "disagreement": v.mean(), "disagreement_lo": v.mean() - z * se,
                     "disagreement_hi": v.mean() + z * se})
    frame = pd.DataFrame(rows)
    rho = spearman(x, y)
    fig = Figure("consensus_drift", "Disagreement by prompt length", "line", {
        "x": ((frame["words_from"] + frame["words_to"]) / 2).tolist(),
        "y": frame["disagreement"].tolist(), "lo": frame["disagreement_lo"].tolist(),
        "hi": frame["disagreement_hi"].tolist(), "x_label": "prompt length (words, bin middle)",
        "y_label": "mean within-answer SD"},
        caption=f"{len(x):,} cases (mean over {int(ok.sum()):,} answers) in {len(frame)} quantile"
        " bins; normal CIs per bin.")
    trend = "rises" if rho.r > 0 and rho.p < 0.05 else "falls" if rho.r < 0 and rho.p < 0.05 \
        else "shows no clear trend"
    summary = (f"Disagreement {trend} with prompt length (Spearman rho {rho.r:.2f},"
               f" p = {rho.p:.2g}, n = {rho.n:,} cases).")
    return Section("consensus_drift", title, summary, {"bins": frame}, [fig],
                   {"spearman_rho": rho.r, "spearman_p": rho.p, "n": rho.n})


# --- 11. rater view ------------------------------------------------------------------------


def rater_view(ctx: Context) -> Section:
    """Leniency: each rater's mean leave-one-out residual, score minus the mean
    of the other raters of the same answer and criterion."""
    d, s = ctx.data, ctx.settings
    title = "Rater view"
    cell = d.rating_answer.astype(np.int64) * d.n_criteria + d.rating_criterion
    size = d.n_answers * d.n_criteria
    n = np.bincount(cell, minlength=size)[cell]
    total = np.bincount(cell, weights=d.rating_score, minlength=size)[cell]
    shared = n >= 2
    if shared.sum() < MIN_ITEMS:
        return Section("rater_view", title, skipped="needs answers rated by several clinicians.")
    resid = d.rating_score[shared] - (total[shared] - d.rating_score[shared]) / (n[shared] - 1)
    rater = d.rating_rater[shared]
    k = np.bincount(rater, minlength=d.n_raters)
    mean = np.bincount(rater, weights=resid, minlength=d.n_raters) / np.maximum(k, 1)
    sq = np.bincount(rater, weights=resid**2, minlength=d.n_raters)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.clip((sq - k * mean**2) / (k - 1), 0, None))
        half = norm.isf((1 - s.level) / 2) * sd / np.sqrt(k)
    per_rater = np.bincount(d.rating_rater, minlength=d.n_raters)
    frame = pd.DataFrame({"rater": np.arange(d.n_raters), "ratings": per_rater, "n": k})
    frame = estimate(frame, "leniency", mean, mean - half, mean + half)
    frame = frame[frame["n"] >= MIN_RATER_RATINGS].copy()
    frame["outlier"] = ((frame["leniency_lo"] > 0) | (frame["leniency_hi"] < 0)) & (
        frame["leniency"].abs() > 0.5)
    frame["rater"] = [f"rater #{i + 1}" for i in frame["rater"]]
    frame = frame.sort_values("leniency", ascending=False, kind="stable").reset_index(drop=True)
    counts = pd.Series(per_rater[per_rater > 0])
    volume = pd.DataFrame({"raters": [len(counts)], "median_ratings": [counts.median()],
                           "p90_ratings": [counts.quantile(0.9)], "max_ratings": [counts.max()]})
    fig = Figure("leniency", "Rater leniency (mean offset from co-raters)", "hist", {
        "series": {"raters": frame["leniency"].tolist()}, "x_label": "score points"},
        caption=f"Raters with at least {MIN_RATER_RATINGS} shared ratings.")
    summary = (f"{len(frame):,} raters have at least {MIN_RATER_RATINGS} shared ratings;"
               f" {int(frame['outlier'].sum())} are outliers (offset > 0.5 points with a CI"
               " excluding 0). Rater labels are positions in this snapshot, not ids.")
    lenient = frame.head(10)
    harsh = frame.iloc[len(lenient):].tail(10)  # never the same rater in both lists
    tables = {"volume": volume, "most_lenient": lenient,
              "harshest": harsh.iloc[::-1].reset_index(drop=True)}
    return Section("rater_view", title, summary, tables, [fig],
                   {"outliers": int(frame["outlier"].sum()), "raters": len(frame)})
