"""Whether longer answers win votes, with and without controlling for model
identity and rubric scores."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, row_ci, row_pct, wilson_pct
from clinieval.audit.preference import Preferences
from clinieval.audit.result import Figure, Histogram, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import (
    A_WINS,
    B_WINS,
    ConvergenceError,
    FeatureBTFit,
    LogisticFit,
    binomial_p_value,
    bt_with_features,
    length_feature,
    logistic_irls,
    normal_ci,
    normal_p_value,
    pairwise_response,
)

KEY, TITLE = "length_bias", "Length bias"
MIN_VOTES = 10
DECIDED = (A_WINS, B_WINS)


@dataclass(frozen=True)
class StyleControl:
    """Bradley-Terry by logistic regression on the fitted models, without and
    with the standardised relative length difference, over ``n`` votes."""

    plain: FeatureBTFit
    styled: FeatureBTFit
    n: int


@dataclass(frozen=True)
class Drivers:
    """Logistic model of 'A won' on standardised differences (``names``)."""

    names: list[str]
    fit: LogisticFit
    n: int


@dataclass(frozen=True)
class LengthBias:
    """Lengths of winners and losers over decided votes; how many of the
    ``unequal`` votes (answers of different length) the longer answer won,
    with the exact binomial p; the length-controlled fit (None when it does
    not exist or no model is fitted) and the drivers model."""

    winner_chars: np.ndarray
    loser_chars: np.ndarray
    unequal: int
    longer_won: int
    p_value: float
    style: StyleControl | None
    style_missing: bool
    drivers: Drivers | None


def compute(ctx: Context, prefs: Preferences) -> LengthBias | Skipped:
    d = ctx.data
    la, lb = d.answer_length[d.pref_a], d.answer_length[d.pref_b]
    known = np.isfinite(la) & np.isfinite(lb)
    decided = known & np.isin(d.pref_outcome, DECIDED)
    if decided.sum() < MIN_VOTES:
        return Skipped(f"needs answer lengths and at least {MIN_VOTES} decided votes; found"
                       f" {int(decided.sum())}.")
    a_won = d.pref_outcome[decided] == A_WINS
    win_len = np.where(a_won, la[decided], lb[decided])
    lose_len = np.where(a_won, lb[decided], la[decided])
    unequal = win_len != lose_len
    if unequal.sum() == 0:
        return Skipped("every decided vote compared answers of equal length.")
    longer = int(np.sum(win_len[unequal] > lose_len[unequal]))
    style = _style_control(ctx, prefs, known) if prefs.available else None
    drivers = _drivers(ctx, known) if style is not None else None
    return LengthBias(win_len, lose_len, int(unequal.sum()), longer,
                      binomial_p_value(longer, int(unequal.sum())), style,
                      prefs.available and style is None, drivers)


def _style_control(ctx: Context, prefs: Preferences, known: np.ndarray
                   ) -> StyleControl | None:
    """None when the fit does not exist (a model won or lost every vote)."""
    d, s = ctx.data, ctx.settings
    keep = prefs.credited & known
    y, _ = pairwise_response(d.pref_outcome[keep], tie_mode=s.ties, bothbad_mode=s.both_bad)
    local = np.full(d.n_models, -1)
    local[prefs.active] = np.arange(len(prefs.active))
    a_m, b_m = local[d.answer_model[d.pref_a[keep]]], local[d.answer_model[d.pref_b[keep]]]
    feat = length_feature(d.answer_length[d.pref_a[keep]], d.answer_length[d.pref_b[keep]])
    try:
        plain = bt_with_features(a_m, b_m, y, None, len(prefs.active))
        styled = bt_with_features(a_m, b_m, y, feat[:, None], len(prefs.active))
    except ConvergenceError:
        return None
    return StyleControl(plain, styled, int(keep.sum()))


def _drivers(ctx: Context, known: np.ndarray) -> Drivers | None:
    """Differences in each safety-critical criterion's answer mean, the other
    criteria's mean, and relative length."""
    d = ctx.data
    decided = known & np.isin(d.pref_outcome, DECIDED)
    means = ctx.answer_mean
    columns, names = [], []
    for c in ctx.safety:
        columns.append(means[d.pref_a, c] - means[d.pref_b, c])
        names.append(f"{ctx.name(c)} difference")
    others = [c for c in ctx.criteria if c not in ctx.safety]
    if others:  # per answer once, then per vote
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # unrated: NaN, as before
            other_mean = np.nanmean(means[:, others], axis=1)
        columns.append(other_mean[d.pref_a] - other_mean[d.pref_b])
        names.append("other criteria (mean) difference")
    la, lb = d.answer_length[d.pref_a], d.answer_length[d.pref_b]
    with np.errstate(invalid="ignore", divide="ignore"):
        columns.append((la - lb) / (la + lb))
    names.append("relative length difference")
    X = np.column_stack(columns)
    ok = decided & np.isfinite(X).all(axis=1)
    # A difference that is always 0 (e.g. every answer got the same score)
    # cannot predict anything and would make the fit singular: leave it out.
    X = X[ok]  # the rows kept, copied once
    varies = np.abs(X).max(axis=0, initial=0.0) > 0
    if ok.sum() < 5 * max(int(varies.sum()), 1) or not varies.any():
        return None
    X, names = X[:, varies], [n for n, v in zip(names, varies, strict=True) if v]
    X /= np.sqrt(np.mean(X**2, axis=0))
    y = (d.pref_outcome[ok] == A_WINS).astype(float)
    return Drivers(names, logistic_irls(X, y, strict=False), int(ok.sum()))


def present(result: LengthBias, ctx: Context, prefs: Preferences) -> Section:
    s = ctx.settings
    frame = wilson_pct(pd.DataFrame({"measure": ["longer answer wins"]}), "share_pct",
                       [result.longer_won], [result.unequal], s.level)
    frame["n"] = result.unequal
    frame["p_value"] = result.p_value
    frame["median_winner_chars"] = np.median(result.winner_chars)
    frame["median_loser_chars"] = np.median(result.loser_chars)
    tables = {"longer_wins": frame}
    figures = [Figure("length_shift", "Lengths of winning and losing answers", Histogram(
        series={"winner": result.winner_chars.tolist(), "loser": result.loser_chars.tolist()},
        x_label="answer length (characters)", log_x=True),
        caption=f"{len(result.winner_chars):,} decided votes.")]
    values = {"longer_wins_pct": float(frame["share_pct"].iloc[0]),
              "longer_wins_n": result.unequal}
    summary = (f"The longer answer won {row_pct(frame.iloc[0], 'share_pct')} of"
               f" {result.unequal:,} decided votes (50% = no length effect).")
    if result.style_missing:
        summary += (" The length-controlled Bradley-Terry fit does not exist here (a model won"
                    " or lost every vote), so it is not reported.")
    if result.style is not None:
        style, coef = _style_tables(result.style, ctx, prefs)
        tables["style_controlled_bt"], tables["length_coefficient"] = style, coef
        values |= {"length_coef": float(coef["coef"].iloc[0]),
                   "length_coef_lo": float(coef["coef_lo"].iloc[0]),
                   "length_coef_hi": float(coef["coef_hi"].iloc[0])}
        summary += (f" Controlling for model identity, the length coefficient is"
                    f" {row_ci(coef.iloc[0], 'coef')} (log-odds per SD of relative length"
                    " difference).")
    if result.drivers is not None:
        drivers = _drivers_table(result.drivers, s.level)
        tables["what_predicts_the_vote"] = drivers
        if np.isfinite(drivers["z"]).any():
            top = drivers.loc[drivers["z"].abs().idxmax()]
            summary += (f" Among rubric differences and length, {top['feature']} predicts the"
                        f" vote most strongly (z = {top['z']:.1f}).")
            values["strongest_predictor"] = top["feature"]
    return Section(KEY, TITLE, summary, tables, figures, values)


def _style_tables(style: StyleControl, ctx: Context, prefs: Preferences
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    level = ctx.settings.level
    frame = pd.DataFrame({"model": ctx.data.model_names})
    for name, fit in (("bt_plain", style.plain), ("bt_length_controlled", style.styled)):
        est, se = prefs.embed(fit.strengths), prefs.embed(fit.strength_se)
        frame = estimate(frame, name, est, *normal_ci(est, se, level))
    frame["rank_plain"] = (-frame["bt_plain"]).rank(method="min")
    frame["rank_length_controlled"] = (-frame["bt_length_controlled"]).rank(method="min")
    frame = frame.sort_values("bt_plain", ascending=False, kind="stable").reset_index(drop=True)
    beta, se = float(style.styled.feature_coef[0]), float(style.styled.feature_se[0])
    coef = pd.DataFrame({"feature": ["relative length (a-b)/(a+b), standardised"],
                         "n": [style.n]})
    coef = estimate(coef, "coef", [beta], *normal_ci([beta], [se], level))
    coef["se"] = se
    coef["p_value"] = normal_p_value(beta / se)
    return frame, coef


def _drivers_table(drivers: Drivers, level: float) -> pd.DataFrame:
    fit = drivers.fit
    frame = pd.DataFrame({"feature": drivers.names, "n": drivers.n})
    frame = estimate(frame, "coef", fit.coef, *normal_ci(fit.coef, fit.se, level))
    frame["z"] = fit.coef / fit.se
    frame["p_value"] = normal_p_value(frame["z"])
    return frame


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx, prefs))


SPEC = SectionSpec(
    KEY, TITLE,
    "Whether longer answers win votes, with and without controlling for model"
    " and rubric scores.",
    section, uses_preferences=True, headline=40)
