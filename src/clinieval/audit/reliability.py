"""How far clinicians agree: reliability per criterion, dispersion,
consensus drift with prompt length, and each rater's leniency."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from clinieval.audit.core import Context
from clinieval.audit.data import N_SCORES
from clinieval.audit.result import Bars, Figure, Heatmap, Histogram, Line, Section
from clinieval.audit.tables import estimate, json_list, row_ci
from clinieval.stats import (
    fleiss_kappa,
    fleiss_kappa_weighted,
    group_mean_ci,
    krippendorff_alpha,
    krippendorff_alpha_weighted,
    merge_identical_rows,
    resample_counts,
    spearman,
)

MIN_ITEMS = 10
MIN_RATER_RATINGS = 20


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
    fig = Figure("reliability", "Fleiss' kappa by criterion", Bars(
        labels=frame["criterion"].tolist(), est=json_list(frame["fleiss_kappa"]),
        lo=json_list(frame["fleiss_kappa_lo"]), hi=json_list(frame["fleiss_kappa_hi"]),
        n=frame["n_items"].tolist(), y_label=f"Fleiss' kappa ({N_SCORES} categories)"),
        caption="Bootstrap CIs resample answers. 0 = chance agreement, 1 = perfect.")
    kappa = {r["criterion"]: r["fleiss_kappa"] for r in rows if np.isfinite(r["fleiss_kappa"])}
    return Section("reliability", title, _reliability_summary(frame),
                   {"agreement": frame}, [fig, _dispersion(ctx)], {"kappa": kappa})


UNDEFINED_KAPPA = ("kappa and alpha are undefined when every rating of a criterion has the same"
                   " score: there is no variation, so agreement cannot be told from chance")


def _reliability_summary(frame: pd.DataFrame) -> str:
    defined = frame[np.isfinite(frame["fleiss_kappa"])]
    undefined = frame.loc[~np.isfinite(frame["fleiss_kappa"]), "criterion"].tolist()
    note = f" Not computable for {', '.join(undefined)}: {UNDEFINED_KAPPA}." if undefined else ""
    if defined.empty:
        return f"Agreement between clinicians is not computable: {UNDEFINED_KAPPA}."
    lo_row = defined.loc[defined["fleiss_kappa"].idxmin()]
    hi_row = defined.loc[defined["fleiss_kappa"].idxmax()]
    if len(defined) == 1:
        return (f"Agreement on {hi_row['criterion']}: Fleiss kappa"
                f" {row_ci(hi_row, 'fleiss_kappa')}." + note)
    return (f"Agreement is highest on {hi_row['criterion']} (Fleiss kappa"
            f" {row_ci(hi_row, 'fleiss_kappa')}) and lowest on {lo_row['criterion']}"
            f" ({row_ci(lo_row, 'fleiss_kappa')}); an average over criteria would hide"
            " this." + note)


def _agreement_row(ctx: Context, c: int, items: np.ndarray) -> dict:
    """Point estimates plus item-bootstrap CIs. Items with the same count
    pattern are merged and resampled as multinomial weights, so the cost is
    per distinct pattern, not per answer."""
    s = ctx.settings
    patterns, freq = merge_identical_rows(items)
    weights = resample_counts(freq, s.bootstrap, ctx.rng(f"reliability/{c}")).astype(float)
    row = {"criterion": ctx.name(c), "n_items": len(items), "n_ratings": int(items.sum())}
    row |= _with_ci(ctx, "fleiss_kappa", fleiss_kappa(items),
                    fleiss_kappa_weighted(patterns, weights))
    row |= _with_ci(ctx, "krippendorff_alpha_ordinal", krippendorff_alpha(items, "ordinal"),
                    krippendorff_alpha_weighted(patterns, weights, "ordinal"))
    row |= _with_ci(ctx, "fail_kappa", fleiss_kappa(_fail_pass(ctx, items)),
                    fleiss_kappa_weighted(_fail_pass(ctx, patterns), weights))
    return row


def _fail_pass(ctx: Context, items: np.ndarray) -> np.ndarray:
    """Score counts collapsed to (failing, passing) counts."""
    return np.column_stack([items[:, : ctx.fail_slots].sum(1), items[:, ctx.fail_slots:].sum(1)])


def _with_ci(ctx: Context, name: str, value: float, reps: np.ndarray) -> dict:
    lo, hi = ctx.ci(reps[np.isfinite(reps)]) if np.isfinite(reps).any() else (np.nan, np.nan)
    return {name: value, f"{name}_lo": lo, f"{name}_hi": hi}


def _dispersion(ctx: Context) -> Figure:
    d = ctx.data
    std = ctx.answer_std[:, ctx.criteria]
    ok = np.isfinite(std)
    values, n = [], []
    for m in range(d.n_models):
        rows = d.answer_model == m
        with np.errstate(invalid="ignore"):
            values.append([float(np.nanmean(std[rows, j])) if ok[rows, j].any() else None
                           for j in range(len(ctx.criteria))])
        n.append(ok[rows].sum(0).tolist())
    return Figure("dispersion", "Mean within-answer SD by model and criterion", Heatmap(
        rows=d.model_names, cols=[ctx.name(c) for c in ctx.criteria], values=values, n=n,
        value_label="mean SD (score points)", scale="sequential"),
        caption="Answers with at least two ratings; higher = clinicians disagree more.")


def consensus_drift(ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Consensus drift with prompt length"
    if not np.isfinite(d.answer_prompt_words).any():
        return Section("consensus_drift", title, skipped="prompt lengths are unknown: the cases"
                       " carry neither prompt_words nor prompt text.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # answers with no multi-rated criterion
        disagreement = np.nanmean(ctx.answer_std[:, ctx.criteria], axis=1)
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
    if edges.size < 2:
        return Section("consensus_drift", title, skipped="every usable case has the same prompt"
                       f" length ({edges[0]:,.0f} words), so there is no length to compare.")
    bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    n, mean, lo, hi = group_mean_ci(bins, y, len(edges) - 1, s.level)
    frame = pd.DataFrame({"words_from": edges[:-1], "words_to": edges[1:], "n": n})
    frame = estimate(frame, "disagreement", mean, lo, hi)
    rho = spearman(x, y)
    fig = Figure("consensus_drift", "Disagreement by prompt length", Line(
        x=((frame["words_from"] + frame["words_to"]) / 2).tolist(),
        y=json_list(frame["disagreement"]), lo=json_list(frame["disagreement_lo"]),
        hi=json_list(frame["disagreement_hi"]), x_label="prompt length (words, bin middle)",
        y_label="mean within-answer SD"),
        caption=f"{len(x):,} cases (mean over {int(ok.sum()):,} answers) in {len(frame)} quantile"
        " bins; normal CIs per bin.")
    return Section("consensus_drift", title, _drift_summary(rho), {"bins": frame}, [fig],
                   {"spearman_rho": rho.r, "spearman_p": rho.p, "n": rho.n})


def _drift_summary(rho) -> str:
    if not np.isfinite(rho.r):
        return (f"The trend with prompt length is not computable over {rho.n:,} cases:"
                " disagreement (or prompt length) does not vary between them.")
    trend = "rises" if rho.r > 0 and rho.p < 0.05 else "falls" if rho.r < 0 and rho.p < 0.05 \
        else "shows no clear trend"
    return (f"Disagreement {trend} with prompt length (Spearman rho {rho.r:.2f},"
            f" p = {rho.p:.2g}, n = {rho.n:,} cases).")


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
    k, mean, lo, hi = group_mean_ci(d.rating_rater[shared], resid, d.n_raters, s.level)
    per_rater = np.bincount(d.rating_rater, minlength=d.n_raters)
    frame = pd.DataFrame({"rater": np.arange(d.n_raters), "ratings": per_rater, "n": k})
    frame = estimate(frame, "leniency", mean, lo, hi)
    frame = frame[frame["n"] >= MIN_RATER_RATINGS].copy()
    frame["outlier"] = ((frame["leniency_lo"] > 0) | (frame["leniency_hi"] < 0)) & (
        frame["leniency"].abs() > 0.5)
    frame["rater"] = [f"rater #{i + 1}" for i in frame["rater"]]
    frame = frame.sort_values("leniency", ascending=False, kind="stable").reset_index(drop=True)
    counts = pd.Series(per_rater[per_rater > 0])
    volume = pd.DataFrame({"raters": [len(counts)], "median_ratings": [counts.median()],
                           "p90_ratings": [counts.quantile(0.9)], "max_ratings": [counts.max()]})
    fig = Figure("leniency", "Rater leniency (mean offset from co-raters)", Histogram(
        series={"raters": frame["leniency"].tolist()}, x_label="score points"),
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
