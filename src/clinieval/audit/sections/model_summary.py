"""Per model and criterion: mean, Fail % of ratings and severe % of ratings
with CIs, beside the Bradley-Terry strength and rank interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.data import SEVERE
from clinieval.audit.failure import FAIL_OF_RATINGS, SEVERE_OF_RATINGS
from clinieval.audit.formatting import estimate
from clinieval.audit.preference import Preferences
from clinieval.audit.result import Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.contract import vocabulary

KEY, TITLE = "model_summary", "Model summary"


@dataclass(frozen=True)
class Strengths:
    """Bradley-Terry strength with its bootstrap interval and rank interval, per model."""

    strength: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rank: np.ndarray
    rank_lo: np.ndarray
    rank_hi: np.ndarray


@dataclass(frozen=True)
class ModelSummary:
    """(models, criteria) arrays: ratings, mean score with its bootstrap
    interval, Fail % and severe % of ratings (the lowest score) with their
    intervals by the design's method (see :meth:`Context.fail_ci`); the
    strengths when there are enough votes."""

    n: np.ndarray
    mean: np.ndarray
    mean_lo: np.ndarray
    mean_hi: np.ndarray
    fail_pct: np.ndarray
    fail_lo: np.ndarray
    fail_hi: np.ndarray
    severe_pct: np.ndarray
    severe_lo: np.ndarray
    severe_hi: np.ndarray
    strengths: Strengths | None


def compute(ctx: Context, prefs: Preferences) -> ModelSummary | Skipped:
    if not ctx.criteria:
        return Skipped("the snapshot has no rubric ratings.")
    means_b, _ = ctx.rating_replicates("ratings")
    fail_lo, fail_hi = ctx.fail_ci("ratings")
    severe_lo, severe_hi = ctx.severe_ci()
    with np.errstate(invalid="ignore", divide="ignore"):
        severe = np.where(ctx.model_n > 0, 100 * ctx.model_counts[:, :, SEVERE] / ctx.model_n,
                          np.nan)
    strengths = None
    if prefs.available:
        strengths = Strengths(prefs.strengths, *ctx.ci(prefs.replicates), *prefs.ranks)
    return ModelSummary(ctx.model_n, ctx.model_mean, *ctx.ci(means_b), ctx.model_fail_pct,
                        100 * fail_lo, 100 * fail_hi, severe, 100 * severe_lo,
                        100 * severe_hi, strengths)


def present(result: ModelSummary, ctx: Context) -> Section:
    s = ctx.settings
    long = _by_criterion(result, ctx)
    summary = (f"Per model and criterion: mean score ({vocabulary.SCORE_MIN:+d}.."
               f"{vocabulary.SCORE_MAX:+d}) with a {s.level:.0%} bootstrap CI ({ctx.design}),"
               " Fail % of"
               " ratings"
               f" (share of ratings <= {s.threshold}) and severe % of ratings (share of"
               f" {vocabulary.SCORE_MIN}), beside the Bradley-Terry preference strength. n counts"
               " ratings.")
    if ctx.too_few_clusters:
        summary += f" No bootstrap intervals: {ctx.too_few_clusters}."
    return Section(KEY, TITLE, summary, {"summary": _wide(result, ctx, long),
                                         "by_criterion": long}, [], {"rows": len(long)})


def _by_criterion(result: ModelSummary, ctx: Context) -> pd.DataFrame:
    d = ctx.data
    rows = [{"model": d.model_names[m], "criterion": ctx.name(c),
             "safety_critical": d.safety_critical[c], "n": int(result.n[m, c]),
             "mean": result.mean[m, c], "mean_lo": result.mean_lo[m, c],
             "mean_hi": result.mean_hi[m, c], FAIL_OF_RATINGS: result.fail_pct[m, c],
             f"{FAIL_OF_RATINGS}_lo": result.fail_lo[m, c],
             f"{FAIL_OF_RATINGS}_hi": result.fail_hi[m, c],
             SEVERE_OF_RATINGS: result.severe_pct[m, c],
             f"{SEVERE_OF_RATINGS}_lo": result.severe_lo[m, c],
             f"{SEVERE_OF_RATINGS}_hi": result.severe_hi[m, c]}
            for m in range(d.n_models) for c in ctx.criteria]
    return pd.DataFrame(rows)


def _wide(result: ModelSummary, ctx: Context, long: pd.DataFrame) -> pd.DataFrame:
    d = ctx.data
    wide = pd.DataFrame({"model": d.model_names})
    for c in ctx.safety or ctx.criteria[:2]:
        part = long[long["criterion"] == ctx.name(c)].reset_index(drop=True)
        key = d.criteria[c]
        for col in ("mean", FAIL_OF_RATINGS):
            wide = estimate(wide, f"{key}_{col}", part[col], part[f"{col}_lo"], part[f"{col}_hi"])
        wide[f"{key}_n"] = part["n"]
    bt = result.strengths
    if bt is not None:
        wide = estimate(wide, "bt", bt.strength, bt.lo, bt.hi)
        wide["rank"], wide["rank_lo"], wide["rank_hi"] = bt.rank, bt.rank_lo, bt.rank_hi
        wide = wide.sort_values("bt", ascending=False, kind="stable").reset_index(drop=True)
    return wide


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Per model and criterion: mean, Fail % of ratings and severe % of ratings"
    " with CIs, beside the Bradley-Terry strength and rank interval.",
    section, uses_preferences=True)
