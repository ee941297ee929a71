"""Ratings per rater and each rater's leniency against co-raters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.counts import SCORES
from clinieval.audit.formatting import estimate
from clinieval.audit.result import Figure, Histogram, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import group_mean_ci

KEY, TITLE = "rater_view", "Rater view"
MIN_SHARED = 10
MIN_RATER_RATINGS = 20
OUTLIER_POINTS = 0.5
LISTED = 10


@dataclass(frozen=True)
class RaterView:
    """Per rater (index = rater code): ratings given, ratings shared with a
    co-rater, and the leniency with its normal interval: the mean of the
    rater's score minus the mean of the other raters of the same answer and
    criterion (NaN without shared ratings)."""

    ratings: np.ndarray
    shared: np.ndarray
    leniency: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def compute(ctx: Context) -> RaterView | Skipped:
    d = ctx.data
    # Ratings and score sums per (answer, criterion) from the context's
    # counts; per rating only what the residuals need, for the shared
    # ratings (int64 per-rating temporaries were 2 GB at 100x).
    counts = ctx.answer_counts
    n_cell = ctx.answer_n.ravel()
    total_cell = (counts @ SCORES).ravel()
    # int32 cell codes when they fit (12.5M cells at 100x): half the bytes of
    # int64 in every pass over the 37.5M ratings.
    wide = np.int32 if n_cell.size < 2**31 else np.int64
    cell = d.rating_answer.astype(wide)
    cell *= d.n_criteria
    cell += d.rating_criterion
    n_rating = n_cell[cell]  # one gather, kept for the shared ratings
    shared = n_rating >= 2
    if shared.sum() < MIN_SHARED:
        return Skipped(f"needs at least {MIN_SHARED} ratings of answers that several clinicians"
                       f" rated on the same criterion; found {int(shared.sum())}.")
    every = bool(shared.all())
    if every:  # every answer rated twice or more: no masked copies
        n_rating -= 1
        score = d.rating_score.astype(float)
    else:
        cell, n_rating = cell[shared], n_rating[shared] - 1
        score = d.rating_score[shared].astype(float)
    other = total_cell[cell]
    del cell
    other -= score
    other /= n_rating
    del n_rating
    resid = score
    resid -= other  # score - (total - score) / (n - 1), in place
    del other
    raters = d.rating_rater if every else d.rating_rater[shared]
    k, mean, lo, hi = group_mean_ci(raters, resid, d.n_raters, ctx.settings.level)
    return RaterView(np.bincount(d.rating_rater, minlength=d.n_raters), k, mean, lo, hi)


def present(result: RaterView, ctx: Context) -> Section:
    frame = pd.DataFrame({"rater": np.arange(len(result.ratings)), "ratings": result.ratings,
                          "n": result.shared})
    frame = estimate(frame, "leniency", result.leniency, result.lo, result.hi)
    frame = frame[frame["n"] >= MIN_RATER_RATINGS].copy()
    frame["outlier"] = ((frame["leniency_lo"] > 0) | (frame["leniency_hi"] < 0)) & (
        frame["leniency"].abs() > OUTLIER_POINTS)
    frame["rater"] = [f"rater #{i + 1}" for i in frame["rater"]]
    frame = frame.sort_values("leniency", ascending=False, kind="stable").reset_index(drop=True)
    counts = pd.Series(result.ratings[result.ratings > 0])
    volume = pd.DataFrame({"raters": [len(counts)], "median_ratings": [counts.median()],
                           "p90_ratings": [counts.quantile(0.9)], "max_ratings": [counts.max()]})
    fig = Figure("leniency", "Rater leniency (mean offset from co-raters)", Histogram(
        series={"raters": frame["leniency"].tolist()}, x_label="score points"),
        caption=f"Raters with at least {MIN_RATER_RATINGS} shared ratings.")
    outliers = int(frame["outlier"].sum())
    summary = (f"{len(frame):,} raters have at least {MIN_RATER_RATINGS} shared ratings;"
               f" {outliers} are outliers (offset > {OUTLIER_POINTS} points with a CI"
               " excluding 0). Rater labels are positions in this snapshot, not ids.")
    lenient = frame.head(LISTED)
    harsh = frame.iloc[len(lenient):].tail(LISTED)  # never the same rater in both lists
    tables = {"volume": volume, "most_lenient": lenient,
              "harshest": harsh.iloc[::-1].reset_index(drop=True)}
    return Section(KEY, TITLE, summary, tables, [fig], {"outliers": outliers,
                                                      "raters": len(frame)})


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Ratings per rater and each rater's leniency against co-raters.",
    section)
