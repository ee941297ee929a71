"""Does the preference ranking follow each criterion? Correlations over
models, and the preference leader's failure gap to the safest model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import json_list
from clinieval.audit.preference import Preferences, no_votes
from clinieval.audit.result import Figure, Scatter, Section
from clinieval.audit.sections._common import Estimate, SectionSpec, Skipped, run_section
from clinieval.stats import (
    Correlation,
    bootstrap_rank_correlation,
    pearson,
    selection_adjusted_gap_ci,
    spearman,
)

KEY, TITLE = "alignment", "Preference-safety alignment audit"
TRACKS_RHO = 0.5


@dataclass(frozen=True)
class Gap:
    """How many points more often (Fail % of ratings) the preference leader
    fails than the safest model, with a bootstrap interval that picks the
    leader and the safest model again in every replicate."""

    leader: int
    safest: int
    leader_fail: float
    safest_fail: float
    gap: Estimate


@dataclass(frozen=True)
class CriterionAlignment:
    """One criterion: correlations of strength and mean score over models
    (Spearman with a bootstrap interval) and, when there is a leader, the gap."""

    criterion: int
    pearson: Correlation
    spearman: Correlation
    rho_lo: float
    rho_hi: float
    gap: Gap | None

    @property
    def tracks(self) -> bool:
        return bool(np.isfinite(self.spearman.r) and self.spearman.r >= TRACKS_RHO
                    and self.rho_lo > 0)


@dataclass(frozen=True)
class Alignment:
    criteria: list[CriterionAlignment]
    leader: int | None
    no_leader: str


def compute(ctx: Context, prefs: Preferences) -> Alignment | Skipped:
    if not prefs.available:
        return no_votes(prefs)
    means_b, fails_b = ctx.rating_replicates("ratings")
    rated = ctx.answer_n > 0
    rows = [_criterion(ctx, prefs, c, means_b[:, :, c], 100 * fails_b[:, :, c], rated[:, c])
            for c in ctx.criteria if np.isfinite(ctx.model_fail_pct[:, c]).any()]
    if not rows:
        return Skipped("no analysed criterion has ratings.")
    return Alignment(rows, prefs.leader, prefs.no_leader)


def _criterion(ctx, prefs, c, mean_reps, fail_reps, rated) -> CriterionAlignment:
    mean = ctx.model_mean[:, c]
    ok = np.isfinite(mean) & np.isfinite(prefs.strengths)
    rho_reps = bootstrap_rank_correlation(prefs.replicates[:, ok], mean_reps[:, ok])
    finite = rho_reps[np.isfinite(rho_reps)]
    rho_lo, rho_hi = ctx.ci(finite) if finite.size else (np.nan, np.nan)
    gap = _gap(ctx, prefs, c, fail_reps, rated) if prefs.leader is not None else None
    return CriterionAlignment(c, pearson(prefs.strengths[ok], mean[ok]),
                              spearman(prefs.strengths[ok], mean[ok]), float(rho_lo),
                              float(rho_hi), gap)


def _gap(ctx: Context, prefs: Preferences, c: int, fail_reps: np.ndarray,
         rated: np.ndarray) -> Gap:
    """The safest model is the lowest observed Fail % among models with
    ``min_n`` rated answers (any rated model when none has). The interval
    re-picks both the leader and the safest model in every replicate, so it
    allows for either pick being wrong (see
    :func:`clinieval.stats.selection_adjusted_gap_ci`)."""
    d, fail = ctx.data, ctx.model_fail_pct[:, c]
    answers = np.bincount(d.answer_model, weights=rated, minlength=d.n_models)
    eligible = (answers >= ctx.settings.min_n) & np.isfinite(fail)
    if not eligible.any():
        eligible = np.isfinite(fail)
    safest = int(np.nanargmin(np.where(eligible, fail, np.nan)))
    gap, lo, hi = selection_adjusted_gap_ci(prefs.strengths, prefs.replicates, fail, fail_reps,
                                            eligible, ctx.settings.level)
    return Gap(prefs.leader, safest, fail[prefs.leader], fail[safest], Estimate(gap, lo, hi))


def present(result: Alignment, ctx: Context, prefs: Preferences) -> Section:
    d = ctx.data
    rows = [_row(ctx, result, r) for r in result.criteria]
    figures = [_figure(ctx, prefs, r.criterion) for r in result.criteria
               if d.safety_critical[r.criterion]]
    verdicts = {r["criterion"]: r["verdict"] for r in rows}
    focus = [r for r in rows if r["safety_critical"]] or rows
    summary = " ".join(r["verdict"] for r in focus)
    if result.leader is not None:
        summary += (" The comparison model is the observed lowest Fail % of ratings among models"
                    f" with at least {ctx.settings.min_n} rated answers; the gap's interval picks"
                    " the leader and the safest model again in every resample, so it allows for"
                    f" either pick being wrong (ratings: {ctx.design}; votes: {prefs.design}).")
    leader = None if result.leader is None else d.model_names[result.leader]
    return Section(KEY, TITLE, summary, {"alignment": pd.DataFrame(rows)}, figures,
                   {"verdicts": verdicts, "leader": leader})


def _row(ctx: Context, result: Alignment, r: CriterionAlignment) -> dict:
    d, name = ctx.data, ctx.name(r.criterion)
    row = {"criterion": name, "safety_critical": d.safety_critical[r.criterion],
           "n": r.spearman.n, "pearson_r": r.pearson.r, "pearson_p": r.pearson.p,
           "spearman_rho": r.spearman.r, "spearman_rho_lo": r.rho_lo,
           "spearman_rho_hi": r.rho_hi, "spearman_p": r.spearman.p, "tracks": r.tracks}
    verdict = _tracking_verdict(name, r, ctx.settings.cluster)
    if r.gap is None:
        return row | {"verdict": verdict + f" There is no preference leader: {result.no_leader}."}
    g = r.gap
    leader, safest = d.model_names[g.leader], d.model_names[g.safest]
    if g.leader != g.safest and g.gap.value > 0:
        verdict += (f" The preference leader {leader} fails {name} {g.gap.value:.1f} points more"
                    f" often than {safest} ({g.leader_fail:.1f}% vs {g.safest_fail:.1f}% of"
                    f" ratings; gap CI {interval(g.gap.lo, g.gap.hi, 1, ctx.settings.cluster)}).")
    elif np.isfinite(g.leader_fail):
        verdict += (f" The preference leader {leader} fails {name} no more often than any other"
                    f" ranked model ({g.leader_fail:.1f}% of ratings).")
    else:
        verdict += f" The preference leader {leader} has no {name} ratings."
    return row | {"leader": leader, "lowest_fail_model": safest, "gap_pp": g.gap.value,
                  "gap_pp_lo": g.gap.lo, "gap_pp_hi": g.gap.hi, "verdict": verdict}


def _tracking_verdict(name: str, r: CriterionAlignment, cluster: str) -> str:
    rho = r.spearman
    if not np.isfinite(rho.r):
        return (f"Whether the preference leaderboard tracks {name} is not computable: it needs"
                " at least 3 models with both a preference strength and ratings, and"
                f" variation in both (n = {rho.n} models).")
    if not (np.isfinite(r.rho_lo) and np.isfinite(r.rho_hi)):
        return (f"Spearman rho between preference and {name} is {rho.r:.2f} (n = {rho.n}"
                f" models), but whether the leaderboard tracks {name} cannot be judged: its"
                f" interval is {interval(r.rho_lo, r.rho_hi, 2, cluster)}.")
    return (f"The preference leaderboard {'tracks' if r.tracks else 'does not track'} {name}"
            f" in this snapshot (Spearman rho {rho.r:.2f}, CI {interval(r.rho_lo, r.rho_hi, 2)},"
            f" n = {rho.n} models).")


def interval(lo: float, hi: float, digits: int, cluster: str = "none") -> str:
    """'[lo, hi]', or why there is no interval."""
    if np.isfinite(lo) and np.isfinite(hi):
        return f"[{lo:.{digits}f}, {hi:.{digits}f}]"
    if cluster == "twoway":
        return ("not computable: a two-way bootstrap needs at least two raters or two cases"
                " with ratings of each model compared")
    if cluster != "none":
        return (f"not computable: a bootstrap over {cluster}s needs at least two {cluster}s"
                " with ratings of each model compared")
    return "not computable: too few resamples with a defined value"


def _figure(ctx: Context, prefs: Preferences, c: int) -> Figure:
    mean = ctx.model_mean[:, c]
    lo, hi = ctx.ci(prefs.replicates)
    m_lo, m_hi = ctx.ci(ctx.rating_replicates("ratings")[0][:, :, c])
    ok = np.isfinite(mean) & np.isfinite(prefs.strengths)
    name = ctx.name(c)
    return Figure(f"alignment_{ctx.data.criteria[c]}", f"Preference strength vs mean {name}",
                  Scatter(x=json_list(prefs.strengths[ok]), y=json_list(mean[ok]),
                          labels=[n for n, k in zip(ctx.data.model_names, ok, strict=True) if k],
                          x_lo=json_list(lo[ok]), x_hi=json_list(hi[ok]),
                          y_lo=json_list(m_lo[ok]), y_hi=json_list(m_hi[ok]),
                          x_label="Bradley-Terry strength", y_label=f"mean {name}", fit=True),
                  caption="Each point is a model. If preference tracked this criterion the points"
                  f" would rise from left to right. Bootstrap CIs - ratings: {ctx.design};"
                  f" votes: {prefs.design}.")


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx, prefs))

def headline_lines(section: Section) -> list[str]:
    """The verdicts on the safety-critical criteria: the summary's first lines."""
    if section.skipped:
        return []
    table = section.tables["alignment"]
    return [row["verdict"] for _, row in table[table["safety_critical"]].iterrows()]



SPEC = SectionSpec(
    KEY, TITLE,
    "Does the preference ranking follow each criterion? Correlations over models,"
    " and the preference leader's failure gap to the best model.",
    section, uses_preferences=True, headline=10, headline_lines=headline_lines)
