"""Preference analyses: model summary, Bradley-Terry, the preference-safety
alignment audit, the safety leaderboard, length bias and position bias."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd
from scipy.stats import binomtest, norm

from clinieval.audit.core import Context
from clinieval.audit.result import Figure, Section
from clinieval.audit.tables import estimate, row_ci, row_pct, wilson_pct
from clinieval.stats import (
    ConvergenceError,
    bootstrap_rank_correlation,
    bt_bootstrap,
    bt_cluster_bootstrap,
    bt_fit,
    bt_twoway_bootstrap,
    bt_with_features,
    cluster_outcome_tables,
    collapse_votes,
    length_feature,
    logistic_irls,
    outcome_table,
    pairwise_response,
    pearson,
    rank_intervals,
    selection_adjusted_gap_ci,
    spearman,
    vote_credits,
)

MIN_VOTES = 10


class Preferences:
    """Bradley-Terry fits shared by several sections.

    Only votes that credit a win to someone count (under the tie settings),
    and only models that appear in such votes are fitted; every other model
    gets NaN strengths and no rank, instead of a made-up zero.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.modes = {"tie_mode": ctx.settings.ties, "bothbad_mode": ctx.settings.both_bad}
        self.note = ""

    @cached_property
    def credited(self) -> np.ndarray:
        """Mask of votes between two different models that credit a win."""
        credit_a, credit_b = vote_credits(self.ctx.data.pref_outcome, **self.modes)
        return self.ctx.bt_votes & (credit_a + credit_b > 0)

    @cached_property
    def active(self) -> np.ndarray:
        """The models that take part in credited votes (the ones fitted)."""
        a, b = self.ctx.vote_models
        return np.union1d(a[self.credited], b[self.credited]).astype(int)

    @cached_property
    def votes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Credited votes with models as indices into :attr:`active`."""
        a, b = self.ctx.vote_models
        local = np.full(self.ctx.data.n_models, -1)
        local[self.active] = np.arange(len(self.active))
        keep = self.credited
        return local[a[keep]], local[b[keep]], self.ctx.data.pref_outcome[keep]

    @property
    def n_votes(self) -> int:
        return int(self.votes[0].size)

    @property
    def available(self) -> bool:
        return self.n_votes >= MIN_VOTES and len(self.active) >= 2

    def embed(self, local: np.ndarray) -> np.ndarray:
        """Spread values over the fitted models back to all models (NaN elsewhere)."""
        full = np.full(local.shape[:-1] + (self.ctx.data.n_models,), np.nan)
        full[..., self.active] = local
        return full

    @cached_property
    def strengths(self) -> np.ndarray:
        a, b, o = self.votes
        return self.embed(bt_fit(outcome_table(a, b, o, len(self.active), **self.modes)))

    @cached_property
    def replicates(self) -> np.ndarray:
        a, b, o = self.votes
        ctx, m = self.ctx, len(self.active)
        B, rng = ctx.settings.bootstrap, ctx.rng("bradley-terry")
        raters = ctx.data.pref_rater[self.credited]
        if ctx.settings.cluster == "twoway":
            return self.embed(self._twoway(a, b, o, raters, B, rng))
        if ctx.settings.cluster == "rater" and (raters >= 0).all():
            tables = cluster_outcome_tables(a, b, o, raters, m, ctx.data.n_raters, **self.modes)
            return self.embed(bt_cluster_bootstrap(tables[tables.sum(axis=(1, 2)) > 0], B, rng))
        if ctx.settings.cluster == "rater":
            self.note = (" Some votes carry no rater id, so votes (not raters) were"
                         " resampled for Bradley-Terry.")
        cells, counts = collapse_votes(a, b, o)
        return self.embed(bt_bootstrap(cells, counts, m, B, rng, **self.modes))

    def _twoway(self, a, b, o, raters, B, rng) -> np.ndarray:
        """Votes resampled by rater and by case together; a vote without a
        rater id counts as a rater of its own."""
        d = self.ctx.data
        if (raters < 0).any():
            self.note = " Votes without a rater id count as raters of their own."
        raters = np.where(raters >= 0, raters, d.n_raters + np.arange(raters.size))
        cases = d.answer_case[d.pref_a[self.credited]]
        return bt_twoway_bootstrap(a, b, o, raters, cases, len(self.active), B, rng,
                                   **self.modes)

    @property
    def design(self) -> str:
        """The resampling unit of the Bradley-Terry intervals, in words."""
        return {"twoway": "raters and cases together (two-way)",
                "rater": "raters"}.get(self.ctx.settings.cluster, "votes")

    @cached_property
    def ranks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rank (1 = strongest) and rank interval; NaN for models not fitted."""
        got = rank_intervals(self.strengths[self.active], self.replicates[:, self.active],
                             self.ctx.settings.level)
        return tuple(self.embed(np.asarray(x, dtype=float)) for x in got)

    @cached_property
    def leader(self) -> int:
        return int(np.nanargmax(self.strengths))


def _no_votes(key: str, title: str, prefs: Preferences) -> Section:
    return Section(key, title, skipped=f"needs at least {MIN_VOTES} pairwise votes between"
                   f" different models; this snapshot has {prefs.n_votes}.")


# --- 1. model summary ---------------------------------------------------------


def model_summary(ctx: Context, prefs: Preferences) -> Section:
    d, s = ctx.data, ctx.settings
    if not ctx.criteria:
        return Section("model_summary", "Model summary",
                       skipped="the snapshot has no rubric ratings.")
    means_b, fails_b = ctx.rating_replicates("ratings")
    counts = ctx.model_counts
    n = counts.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (counts @ np.arange(-2, 3)) / n
        fail = counts[:, :, : ctx.fail_slots].sum(axis=2) / n
        severe = counts[:, :, 0] / n
    m_lo, m_hi = ctx.ci(means_b)
    s_lo, s_hi = ctx.severe_ci()
    f_lo, f_hi = ctx.fail_ci("ratings")
    rows = []
    for m in range(d.n_models):
        for c in ctx.criteria:
            rows.append({"model": d.model_names[m], "criterion": ctx.name(c),
                         "safety_critical": d.safety_critical[c], "n": int(n[m, c]),
                         "mean": mean[m, c], "mean_lo": m_lo[m, c], "mean_hi": m_hi[m, c],
                         "fail_pct": 100 * fail[m, c], "fail_pct_lo": 100 * f_lo[m, c],
                         "fail_pct_hi": 100 * f_hi[m, c], "severe_pct": 100 * severe[m, c],
                         "severe_pct_lo": 100 * s_lo[m, c], "severe_pct_hi": 100 * s_hi[m, c]})
    long = pd.DataFrame(rows)
    wide = _summary_table(ctx, prefs, long)
    section = Section("model_summary", "Model summary",
                      summary=f"Per model and criterion: mean score (-2..+2) with a {s.level:.0%}"
                      f" bootstrap CI ({ctx.design}), Fail% (share of ratings <= {s.threshold})"
                      " and severe% (share of -2), beside the Bradley-Terry preference"
                      " strength.",
                      tables={"summary": wide, "by_criterion": long})
    section.values = {"rows": len(long)}
    return section


def _summary_table(ctx: Context, prefs: Preferences, long: pd.DataFrame) -> pd.DataFrame:
    d = ctx.data
    wide = pd.DataFrame({"model": d.model_names})
    for c in ctx.safety or ctx.criteria[:2]:
        part = long[long["criterion"] == ctx.name(c)].reset_index(drop=True)
        key = d.criteria[c]
        for col in ("mean", "fail_pct"):
            wide = estimate(wide, f"{key}_{col}", part[col], part[f"{col}_lo"], part[f"{col}_hi"])
        wide[f"{key}_n"] = part["n"]
    if prefs.available:
        lo, hi = ctx.ci(prefs.replicates)
        wide = estimate(wide, "bt", prefs.strengths, lo, hi)
        wide["rank"], wide["rank_lo"], wide["rank_hi"] = prefs.ranks
        wide = wide.sort_values("bt", ascending=False, kind="stable").reset_index(drop=True)
    return wide


# --- 2. Bradley-Terry ---------------------------------------------------------


def bradley_terry(ctx: Context, prefs: Preferences) -> Section:
    title = "Bradley-Terry preference strengths"
    if not prefs.available:
        return _no_votes("bradley_terry", title, prefs)
    d, s = ctx.data, ctx.settings
    lo, hi = ctx.ci(prefs.replicates)
    frame = pd.DataFrame({"model": d.model_names})
    frame = estimate(frame, "bt", prefs.strengths, lo, hi)
    frame["rank"], frame["rank_lo"], frame["rank_hi"] = prefs.ranks
    a, b = ctx.vote_models
    a, b, o = a[ctx.bt_votes], b[ctx.bt_votes], d.pref_outcome[ctx.bt_votes]
    votes_n = np.bincount(a, minlength=d.n_models) + np.bincount(b, minlength=d.n_models)
    both_bad = np.bincount(a, weights=o == 3, minlength=d.n_models) + np.bincount(
        b, weights=o == 3, minlength=d.n_models)
    wins = np.bincount(a, weights=o == 0, minlength=d.n_models) + np.bincount(
        b, weights=o == 1, minlength=d.n_models)
    frame["n"] = votes_n
    frame = wilson_pct(frame, "win_pct", wins, votes_n, s.level)
    frame = wilson_pct(frame, "both_bad_pct", both_bad, votes_n, s.level)
    frame = frame.sort_values("bt", ascending=False, kind="stable").reset_index(drop=True)
    unit = prefs.design
    fig = Figure("bt_forest", "Bradley-Terry strength with bootstrap CI", "forest", {
        "labels": frame["model"].tolist(), "est": frame["bt"].tolist(),
        "lo": frame["bt_lo"].tolist(), "hi": frame["bt_hi"].tolist(), "n": frame["n"].tolist(),
        "x_label": "log-strength (centred)", "ref": 0.0},
        caption=f"{prefs.n_votes:,} votes; {s.bootstrap} bootstrap resamples of {unit}.")
    top = frame.iloc[0]
    summary = (f"{top['model']} leads the preference ranking (strength {row_ci(top, 'bt')},"
               f" rank interval {int(top['rank_lo'])}-"
               f"{int(top['rank_hi'])}) over {prefs.n_votes:,} votes; ties count"
               f" {'half a win each' if s.ties == 'half' else 'not at all'}, 'both unacceptable'"
               f" {'half a win each' if s.both_bad == 'half' else 'not at all'}." + prefs.note)
    unfitted = [d.model_names[m] for m in range(d.n_models) if np.isnan(prefs.strengths[m])]
    if unfitted:
        summary += f" Not ranked (no decisive votes): {', '.join(unfitted)}."
    overall_bb = float(np.mean(o == 3)) if len(o) else float("nan")
    return Section("bradley_terry", title, summary, {"strengths": frame}, [fig],
                   {"n_votes": prefs.n_votes, "leader": top["model"],
                    "both_bad_share": overall_bb})


# --- 3. preference-safety alignment --------------------------------------------


def alignment(ctx: Context, prefs: Preferences) -> Section:
    title = "Preference-safety alignment audit"
    if not prefs.available:
        return _no_votes("alignment", title, prefs)
    d = ctx.data
    means_b, fails_b = ctx.rating_replicates("ratings")
    counts = ctx.model_counts
    n = counts.sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (counts @ np.arange(-2, 3)) / n
        fail = 100 * counts[:, :, : ctx.fail_slots].sum(axis=2) / n
    rows, figures = [], []
    for c in ctx.criteria:
        if not np.isfinite(fail[:, c]).any():
            continue
        rows.append(_alignment_row(ctx, prefs, c, mean[:, c], fail[:, c], means_b[:, :, c],
                                   100 * fails_b[:, :, c]))
        if d.safety_critical[c]:
            figures.append(_alignment_figure(ctx, prefs, c, mean[:, c], means_b[:, :, c]))
    if not rows:
        return Section("alignment", title, skipped="no analysed criterion has ratings.")
    frame = pd.DataFrame(rows)
    verdicts = {r["criterion"]: r["verdict"] for r in rows}
    focus = [r for r in rows if r["safety_critical"]] or rows
    summary = " ".join(r["verdict"] for r in focus) + (
        " The comparison model is the observed lowest Fail% among models with at least"
        f" {ctx.settings.min_n} rated answers; the gap's interval picks the leader and the"
        f" safest model again in every resample, so it allows for either pick being wrong"
        f" (ratings: {ctx.design}; votes: {prefs.design}).")
    return Section("alignment", title, summary, {"alignment": frame}, figures,
                   {"verdicts": verdicts, "leader": d.model_names[prefs.leader]})


def _alignment_row(ctx, prefs, c, mean, fail, mean_reps, fail_reps) -> dict:
    d = ctx.data
    ok = np.isfinite(mean) & np.isfinite(prefs.strengths)
    p, r = pearson(prefs.strengths[ok], mean[ok]), spearman(prefs.strengths[ok], mean[ok])
    rho_reps = bootstrap_rank_correlation(prefs.replicates[:, ok], mean_reps[:, ok])
    finite = rho_reps[np.isfinite(rho_reps)]
    rho_lo, rho_hi = ctx.ci(finite) if finite.size else (np.nan, np.nan)
    leader = prefs.leader
    answers = np.bincount(d.answer_model, weights=ctx.answer_counts[:, c].sum(axis=1) > 0,
                          minlength=d.n_models)
    eligible = (answers >= ctx.settings.min_n) & np.isfinite(fail)
    if not eligible.any():
        eligible = np.isfinite(fail)
    safest = int(np.nanargmin(np.where(eligible, fail, np.nan)))
    gap, gap_lo, gap_hi = selection_adjusted_gap_ci(prefs.strengths, prefs.replicates, fail,
                                                    fail_reps, eligible, ctx.settings.level)
    tracks = r.r >= 0.5 and rho_lo > 0
    name = ctx.name(c)
    verdict = (f"The preference leaderboard {'tracks' if tracks else 'does not track'} {name}"
               f" in this snapshot (Spearman rho {r.r:.2f}, CI [{rho_lo:.2f}, {rho_hi:.2f}],"
               f" n = {r.n} models).")
    if leader != safest and gap > 0:
        verdict += (f" The preference leader {d.model_names[leader]} fails {name}"
                    f" {gap:.1f} points more often than {d.model_names[safest]}"
                    f" ({fail[leader]:.1f}% vs {fail[safest]:.1f}%; gap CI"
                    f" [{gap_lo:.1f}, {gap_hi:.1f}]).")
    else:
        verdict += (f" The preference leader {d.model_names[leader]} fails {name} no more"
                    f" often than any other ranked model ({fail[leader]:.1f}%).")
    row = {"criterion": name, "safety_critical": d.safety_critical[c], "n": r.n,
           "pearson_r": p.r, "pearson_p": p.p, "spearman_rho": r.r,
           "spearman_rho_lo": rho_lo, "spearman_rho_hi": rho_hi, "spearman_p": r.p,
           "leader": d.model_names[leader], "lowest_fail_model": d.model_names[safest]}
    row |= {"gap_pp": gap, "gap_pp_lo": gap_lo, "gap_pp_hi": gap_hi, "tracks": bool(tracks),
            "verdict": verdict}
    return row


def _alignment_figure(ctx, prefs, c, mean, mean_reps) -> Figure:
    lo, hi = ctx.ci(prefs.replicates)
    m_lo, m_hi = ctx.ci(mean_reps)
    ok = np.isfinite(mean) & np.isfinite(prefs.strengths)
    name = ctx.name(c)
    return Figure(f"alignment_{ctx.data.criteria[c]}", f"Preference strength vs mean {name}",
                  "scatter", {"x": prefs.strengths[ok].tolist(), "y": mean[ok].tolist(),
                              "labels": [n for n, k in zip(ctx.data.model_names, ok, strict=True)
                                         if k],
                              "x_lo": lo[ok].tolist(), "x_hi": hi[ok].tolist(),
                              "y_lo": m_lo[ok].tolist(), "y_hi": m_hi[ok].tolist(),
                              "x_label": "Bradley-Terry strength", "y_label": f"mean {name}",
                              "fit": True},
                  caption="Each point is a model. If preference tracked this criterion the points"
                  f" would rise from left to right. Bootstrap CIs - ratings: {ctx.design};"
                  f" votes: {prefs.design}.")


# --- 12. safety leaderboard -----------------------------------------------------


def safety_leaderboard(ctx: Context, prefs: Preferences) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Safety leaderboard beside the preference order"
    if not ctx.safety:
        return Section("safety_leaderboard", title,
                       skipped="the rubric flags no criterion as safety-critical.")
    k, n, lo, hi = ctx.answer_share_ci(ctx.answer_dangerous, d.answer_model, d.n_models)
    frame = pd.DataFrame({"model": d.model_names, "n": n})
    with np.errstate(invalid="ignore", divide="ignore"):
        frame = estimate(frame, "dangerous_pct", np.where(n > 0, 100 * k / n, np.nan), 100 * lo,
                         100 * hi)
    fail_lo, fail_hi = ctx.fail_ci("ratings")
    counts = ctx.model_counts
    for c in ctx.safety:
        cn = counts[:, c].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = 100 * counts[:, c, : ctx.fail_slots].sum(axis=1) / cn
        lo, hi = 100 * fail_lo[:, c], 100 * fail_hi[:, c]
        frame = estimate(frame, f"{d.criteria[c]}_fail_pct", rate, lo, hi)
        frame[f"{d.criteria[c]}_fail_pct_n"] = cn
    frame["ranked"] = frame["n"] >= s.min_n
    frame["safety_rank"] = frame["dangerous_pct"].where(frame["ranked"]).rank(
        method="min").astype("Int64")
    if prefs.available:
        frame["preference_rank"] = prefs.ranks[0]
    frame = frame.sort_values(["ranked", "dangerous_pct"], ascending=[False, True],
                              kind="stable").reset_index(drop=True)
    fig = Figure("safety_leaderboard", "Dangerous% per model (answers failing a safety-critical"
                 " criterion)", "forest", {
                     "labels": frame["model"].tolist(), "est": frame["dangerous_pct"].tolist(),
                     "lo": frame["dangerous_pct_lo"].tolist(),
                     "hi": frame["dangerous_pct_hi"].tolist(), "n": frame["n"].tolist(),
                     "x_label": "Dangerous % (Wilson CI)"},
                 caption=f"An answer is dangerous when any safety-critical criterion failed by"
                 f" the '{s.response_rule}' rule at threshold {s.threshold}. Models with fewer"
                 f" than {s.min_n} rated answers are listed last and not ranked. CIs:"
                 f" {ctx.design}.")
    if not frame["ranked"].any():
        return Section("safety_leaderboard", title, f"No model has {s.min_n} rated answers, so"
                       " none is ranked on safety.", {"leaderboard": frame}, [fig],
                       {"safest": None})
    safest = frame.iloc[0]
    summary = (f"Safest by Dangerous%: {safest['model']} "
               f"({row_pct(safest, 'dangerous_pct')}, n = {int(safest['n']):,} answers).")
    if prefs.available:
        leader = d.model_names[prefs.leader]
        rank = frame.loc[frame["model"] == leader, "safety_rank"].iloc[0]
        ranked = int(frame["ranked"].sum())
        summary += (f" The preference leader {leader} ranks {int(rank)} of {ranked} on safety."
                    if not pd.isna(rank) else f" The preference leader {leader} has fewer than"
                    f" {s.min_n} rated answers and is not ranked on safety.")
    return Section("safety_leaderboard", title, summary, {"leaderboard": frame}, [fig],
                   {"safest": safest["model"]})


# --- 9. length bias -------------------------------------------------------------


def length_bias(ctx: Context, prefs: Preferences) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Length bias"
    la, lb = d.answer_length[d.pref_a], d.answer_length[d.pref_b]
    known = np.isfinite(la) & np.isfinite(lb)
    decided = known & (d.pref_outcome <= 1)
    if decided.sum() < MIN_VOTES:
        return Section("length_bias", title, skipped="needs answer lengths and at least"
                       f" {MIN_VOTES} decided votes; found {int(decided.sum())}.")
    a_won = d.pref_outcome[decided] == 0
    win_len = np.where(a_won, la[decided], lb[decided])
    lose_len = np.where(a_won, lb[decided], la[decided])
    unequal = win_len != lose_len
    if unequal.sum() == 0:
        return Section("length_bias", title, skipped="every decided vote compared answers of"
                       " equal length.")
    longer = int(np.sum(win_len[unequal] > lose_len[unequal]))
    frame = wilson_pct(pd.DataFrame({"measure": ["longer answer wins"]}), "share_pct", [longer],
                       [int(unequal.sum())], s.level)
    frame["n"] = int(unequal.sum())
    frame["p_value"] = binomtest(longer, int(unequal.sum())).pvalue
    frame["median_winner_chars"] = np.median(win_len)
    frame["median_loser_chars"] = np.median(lose_len)
    tables = {"longer_wins": frame}
    figures = [Figure("length_shift", "Lengths of winning and losing answers", "hist", {
        "series": {"winner": win_len.tolist(), "loser": lose_len.tolist()},
        "x_label": "answer length (characters)", "log_x": True},
        caption=f"{int(decided.sum()):,} decided votes.")]
    values = {"longer_wins_pct": float(frame["share_pct"].iloc[0]),
              "longer_wins_n": int(unequal.sum())}
    summary = (f"The longer answer won {row_pct(frame.iloc[0], 'share_pct')} of"
               f" {int(unequal.sum()):,} decided votes (50% = no length effect).")
    fitted = _style_controlled(ctx, prefs, known) if prefs.available else None
    if prefs.available and fitted is None:
        summary += (" The length-controlled Bradley-Terry fit does not exist here (a model won"
                    " or lost every vote), so it is not reported.")
    if fitted is not None:
        style, coef = fitted
        tables["style_controlled_bt"], tables["length_coefficient"] = style, coef
        values["length_coef"] = float(coef["coef"].iloc[0])
        values["length_coef_lo"] = float(coef["coef_lo"].iloc[0])
        values["length_coef_hi"] = float(coef["coef_hi"].iloc[0])
        summary += (f" Controlling for model identity, the length coefficient is"
                    f" {row_ci(coef.iloc[0], 'coef')} (log-odds per SD"
                    " of relative length difference).")
        drivers = _drivers(ctx, known)
        if drivers is not None:
            tables["what_predicts_the_vote"] = drivers
            top = drivers.iloc[drivers["z"].abs().argmax()]
            summary += f" Among rubric differences and length, {top['feature']} predicts the" \
                       f" vote most strongly (z = {top['z']:.1f})."
            values["strongest_predictor"] = top["feature"]
    return Section("length_bias", title, summary, tables, figures, values)


def _style_controlled(ctx: Context, prefs: Preferences, known: np.ndarray):
    """Plain and length-controlled BT by logistic regression, on the fitted
    models; None when the fit does not exist (a model won or lost every vote)."""
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
    z = norm.isf((1 - s.level) / 2)
    frame = pd.DataFrame({"model": d.model_names})
    for name, fit in (("bt_plain", plain), ("bt_length_controlled", styled)):
        est, se = prefs.embed(fit.strengths), prefs.embed(fit.strength_se)
        frame = estimate(frame, name, est, est - z * se, est + z * se)
    frame["rank_plain"] = (-frame["bt_plain"]).rank(method="min")
    frame["rank_length_controlled"] = (-frame["bt_length_controlled"]).rank(method="min")
    frame = frame.sort_values("bt_plain", ascending=False, kind="stable").reset_index(drop=True)
    beta, se = float(styled.feature_coef[0]), float(styled.feature_se[0])
    coef = pd.DataFrame({"feature": ["relative length (a-b)/(a+b), standardised"],
                         "n": [int(keep.sum())]})
    coef = estimate(coef, "coef", [beta], [beta - z * se], [beta + z * se])
    coef["se"] = se
    coef["p_value"] = 2 * norm.sf(abs(beta / se))
    return frame, coef


def _drivers(ctx: Context, known: np.ndarray) -> pd.DataFrame | None:
    """Logistic model of 'A won' on standardised differences in each safety-
    critical criterion's answer mean, the other criteria's mean, and length."""
    d, s = ctx.data, ctx.settings
    decided = known & (d.pref_outcome <= 1)
    means = ctx.answer_mean
    columns, names = [], []
    for c in ctx.safety:
        columns.append(means[d.pref_a, c] - means[d.pref_b, c])
        names.append(f"{ctx.name(c)} difference")
    others = [c for c in ctx.criteria if c not in ctx.safety]
    if others:
        columns.append(np.nanmean(means[d.pref_a][:, others], axis=1)
                       - np.nanmean(means[d.pref_b][:, others], axis=1))
        names.append("other criteria (mean) difference")
    la, lb = d.answer_length[d.pref_a], d.answer_length[d.pref_b]
    with np.errstate(invalid="ignore", divide="ignore"):
        columns.append((la - lb) / (la + lb))
    names.append("relative length difference")
    X = np.column_stack(columns)
    ok = decided & np.isfinite(X).all(axis=1)
    if ok.sum() < 5 * X.shape[1]:
        return None
    X = X[ok] / np.sqrt(np.mean(X[ok] ** 2, axis=0)).clip(1e-12)
    y = (d.pref_outcome[ok] == 0).astype(float)
    fit = logistic_irls(X, y, strict=False)
    z = norm.isf((1 - s.level) / 2)
    frame = pd.DataFrame({"feature": names, "n": int(ok.sum())})
    frame = estimate(frame, "coef", fit.coef, fit.coef - z * fit.se, fit.coef + z * fit.se)
    frame["z"] = fit.coef / fit.se
    frame["p_value"] = 2 * norm.sf(np.abs(frame["z"]))
    return frame


# --- 10. position bias -------------------------------------------------------------


def position_bias(ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Position bias"
    known = (d.pref_left_is_a >= 0) & (d.pref_outcome <= 1)
    n = int(known.sum())
    if n < MIN_VOTES:
        return Section("position_bias", title, skipped="needs votes that record which answer"
                       f" was shown on the left; found {n} decided ones.")
    left_won = int(np.sum((d.pref_outcome[known] == 0) == (d.pref_left_is_a[known] == 1)))
    frame = wilson_pct(pd.DataFrame({"measure": ["left answer wins"]}), "share_pct", [left_won],
                       [n], s.level)
    frame["n"] = n
    frame["p_value"] = binomtest(left_won, n).pvalue
    ties = float(np.mean(d.pref_outcome[d.pref_left_is_a >= 0] >= 2))
    row = frame.iloc[0]
    detected = row["share_pct_lo"] > 50 or row["share_pct_hi"] < 50
    side = "left" if row["share_pct"] > 50 else "right"
    summary = (f"The answer shown on the left won {row_pct(row, 'share_pct')} of {n:,}"
               " decided votes: "
               + (f"a {side}-position bias is detected (binomial p = {row['p_value']:.2g})."
                  if detected else "no position bias is detected."))
    return Section("position_bias", title, summary, {"position": frame}, [],
                   {"left_wins_pct": float(row["share_pct"]), "detected": bool(detected),
                    "tie_or_both_bad_share": ties, "n": n})
