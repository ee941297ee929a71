"""The pairwise judge's preference order: Bradley-Terry strengths and win
rates from its verdicts, beside the clinicians' Bradley-Terry.

- Both orders of a pair are kept as two verdicts (a judge that follows the
  first-shown answer then splits the pair, which is what it said). Ties
  and 'both unacceptable' count as the audit's tie settings say.
- Intervals resample cases, so the two orders of a pair and every pair of
  one case stay together; rank intervals from the same replicates.
- Position-inconsistent pairs: pairs judged in both orders whose verdict
  (in A/B terms) differs between the orders, with a Wilson interval.
- Spearman's rho between the judge's strengths and the clinicians' over the
  models both fitted, with an interval from one bootstrap of cases that
  draws the judge's verdicts and the clinicians' votes together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, fmt_ci, json_list, wilson_pct
from clinieval.audit.judged import Judged, judged
from clinieval.audit.preference import Preferences, rank_interval
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections._judge_rows import answer_codes
from clinieval.contract.vocabulary import CHOICES
from clinieval.stats import (
    bootstrap_rank_correlation,
    bt_fit,
    cluster_outcome_tables,
    paired_bt_cluster_bootstrap,
    rank_intervals,
    spearman,
    vote_credits,
)

KEY, TITLE = "judge_preferences", "Pairwise judge: Bradley-Terry"
MIN_VERDICTS = 10
_PAIR = ["judge_model", "answer_id", "answer_b_id", "juror", "repeat"]


@dataclass(frozen=True)
class Verdicts:
    """Decided verdicts between two different models in the audit's codes:
    models ``a``, ``b``, outcome code (index in CHOICES) and case."""

    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    case: np.ndarray


def _outcome(rows: pd.DataFrame) -> np.ndarray:
    """The verdict's CHOICES code; from A's share of the win when the
    choice is not one of them (1 A, 0 B, 0.5 tie); -1 when unknown."""
    code = pd.Index(CHOICES).get_indexer(rows["choice"])
    score = rows["score"].to_numpy(float)
    from_score = np.select([score == 1.0, score == 0.0, score == 0.5], [0, 1, 2], -1)
    return np.where(code >= 0, code, from_score)


def _verdicts(ctx: Context, data: Judged, rows: pd.DataFrame) -> Verdicts:
    ok = rows[rows["ok"]]
    a_code = answer_codes(ctx, data, ok["answer_id"])
    b_code = answer_codes(ctx, data, ok["answer_b_id"].fillna(""))
    outcome = _outcome(ok)
    keep = (a_code >= 0) & (b_code >= 0) & (outcome >= 0)
    a = ctx.data.answer_model[a_code[keep]]
    b = ctx.data.answer_model[b_code[keep]]
    differ = a != b
    case = ctx.data.answer_case[a_code[keep]]
    return Verdicts(a[differ], b[differ], outcome[keep][differ], case[differ])


def _inconsistent(rows: pd.DataFrame, level: float) -> pd.DataFrame:
    """Pairs with a parsed verdict in both orders, and those whose verdicts differ."""
    ok = rows[rows["ok"] & rows["shown_first"].isin(("A", "B"))].fillna({"answer_b_id": ""})
    both = ok.groupby(_PAIR).filter(lambda g: g["shown_first"].nunique() == 2)
    per_pair = both.groupby(_PAIR)["choice"].nunique()
    k, n = int((per_pair > 1).sum()), len(per_pair)
    frame = wilson_pct(pd.DataFrame({"measure": ["pairs whose verdict changes with the order"]}),
                       "inconsistent_pct", [k], [n], level)
    frame["inconsistent"], frame["n"] = k, n
    return frame


@dataclass(frozen=True)
class JudgeBT:
    table: pd.DataFrame
    inconsistent: pd.DataFrame
    rho: tuple[float, float, float, int]
    n_verdicts: int


def _fit(ctx: Context, v: Verdicts, prefs: Preferences) -> tuple[pd.DataFrame, tuple]:
    modes = {"tie_mode": ctx.settings.ties, "bothbad_mode": ctx.settings.both_bad}
    credit_a, credit_b = vote_credits(v.outcome, **modes)
    counted = credit_a + credit_b > 0
    models = np.union1d(v.a[counted], v.b[counted])
    local = np.full(ctx.data.n_models, -1)
    local[models] = np.arange(models.size)
    n_cases = int(ctx.data.answer_case.max()) + 1
    judge = cluster_outcome_tables(local[v.a[counted]], local[v.b[counted]], v.outcome[counted],
                                   v.case[counted], models.size, n_cases, **modes)
    clin = _clinician_tables(ctx, prefs, local, models.size, n_cases, modes)
    reps, clin_reps = paired_bt_cluster_bootstrap(judge, clin, ctx.settings.bootstrap,
                                                  ctx.rng(f"{KEY}:bootstrap"))
    strength = bt_fit(judge.sum(axis=0))
    frame = _table(ctx, prefs, models, strength, reps, v, counted, credit_a, credit_b)
    return frame, _rho(ctx, prefs, strength, clin, reps, clin_reps)


def _clinician_tables(ctx: Context, prefs: Preferences, local: np.ndarray, m: int,
                      n_cases: int, modes: dict) -> np.ndarray:
    """The clinicians' votes between models the judge fitted, per case."""
    if not prefs.available:
        return np.zeros((n_cases, m, m))
    a, b = ctx.vote_models
    keep = prefs.credited & (local[a] >= 0) & (local[b] >= 0)
    return cluster_outcome_tables(local[a[keep]], local[b[keep]], ctx.data.pref_outcome[keep],
                                  ctx.data.answer_case[ctx.data.pref_a[keep]], m, n_cases,
                                  **modes)


def _table(ctx: Context, prefs: Preferences, models: np.ndarray, strength: np.ndarray,
           reps: np.ndarray, v: Verdicts, counted: np.ndarray, credit_a: np.ndarray,
           credit_b: np.ndarray) -> pd.DataFrame:
    """Strengths, rank intervals and win rates (ties as the settings credit
    them) of the fitted ``models``, the clinicians' strengths beside."""
    m = models.size
    lo, hi = ctx.ci(reps)
    ranks = rank_intervals(strength, reps, ctx.settings.level)
    local = np.full(ctx.data.n_models, -1)
    local[models] = np.arange(m)
    a, b = local[v.a[counted]], local[v.b[counted]]
    verdicts = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    credit = np.bincount(a, credit_a[counted], m) + np.bincount(b, credit_b[counted], m)
    frame = pd.DataFrame({"model": [ctx.data.model_names[i] for i in models]})
    frame = estimate(frame, "judge_bt", strength, lo, hi)
    frame["rank"], frame["rank_lo"], frame["rank_hi"] = ranks
    frame = wilson_pct(frame, "judge_win_pct", credit, verdicts, ctx.settings.level)
    frame["n"] = verdicts
    if prefs.available:
        c_lo, c_hi = ctx.ci(prefs.replicates)
        frame = estimate(frame, "clinicians_bt", prefs.strengths[models], c_lo[models],
                         c_hi[models])
        rank, rank_lo, rank_hi = prefs.ranks
        frame["clinicians_rank"] = rank[models]
        frame["clinicians_rank_lo"], frame["clinicians_rank_hi"] = rank_lo[models], rank_hi[models]
    return frame.sort_values("judge_bt", ascending=False, kind="stable").reset_index(drop=True)


def _rho(ctx: Context, prefs: Preferences, strength: np.ndarray, clin: np.ndarray,
         reps: np.ndarray, clin_reps: np.ndarray) -> tuple[float, float, float, int]:
    """Rank correlation of the judge's and the clinicians' strengths over
    the models both fitted (the clinicians' refitted on those models)."""
    fitted = clin.sum(axis=(0, 2)) + clin.sum(axis=(0, 1)) > 0
    if not prefs.available or fitted.sum() < 3:
        return (np.nan, np.nan, np.nan, int(fitted.sum()))
    sub = np.ix_(fitted, fitted)
    clin_fit = bt_fit(clin.sum(axis=0)[sub])
    rho = spearman(strength[fitted], clin_fit)
    rr = bootstrap_rank_correlation(reps[:, fitted], clin_reps[:, fitted])
    rr = rr[np.isfinite(rr)]
    lo, hi = ctx.ci(rr) if rr.size and np.isfinite(rho.r) else (np.nan, np.nan)
    return (rho.r, float(lo), float(hi), rho.n)


def compute(ctx: Context, prefs: Preferences) -> JudgeBT | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    rows = data.kind("pairwise")
    v = _verdicts(ctx, data, rows)
    if v.a.size < MIN_VERDICTS or np.union1d(v.a, v.b).size < 2:
        return Skipped(f"needs at least {MIN_VERDICTS} parsed pairwise verdicts between two"
                       f" different models; found {v.a.size}.")
    table, rho = _fit(ctx, v, prefs)
    return JudgeBT(table, _inconsistent(rows, ctx.settings.level), rho, int(v.a.size))


def present(result: JudgeBT, ctx: Context) -> Section:
    t = result.table
    fig = Figure(f"{KEY}_forest", "Pairwise judge's Bradley-Terry strength per model", Forest(
        labels=t["model"].tolist(), est=json_list(t["judge_bt"]), lo=json_list(t["judge_bt_lo"]),
        hi=json_list(t["judge_bt_hi"]), n=t["n"].astype(int).tolist(),
        x_label="log-strength (centred)", ref=0.0),
        caption=f"{result.n_verdicts:,} verdicts, both orders of a pair kept as two; bootstrap"
        " over cases; n counts the model's verdicts.")
    tables = {"strengths": t}
    if result.inconsistent["n"].iloc[0]:
        tables["position_inconsistent"] = result.inconsistent
    rho, lo, hi, n = result.rho
    values = {"leader": str(t.iloc[0]["model"]), "n_verdicts": result.n_verdicts,
              "rho": float(rho) if np.isfinite(rho) else None, "rho_models": n,
              "inconsistent_pct": _pct(result.inconsistent)}
    return Section(KEY, TITLE, _summary(result, ctx), tables, [fig], values)


def _pct(frame: pd.DataFrame) -> float | None:
    value = frame["inconsistent_pct"].iloc[0]
    return float(value) if np.isfinite(value) else None


def _summary(result: JudgeBT, ctx: Context) -> str:
    top = result.table.iloc[0]
    text = (f"The pairwise judge prefers {top['model']} (strength"
            f" {fmt_ci(top['judge_bt'], top['judge_bt_lo'], top['judge_bt_hi'])},"
            f" {rank_interval(top)}; {result.n_verdicts:,} verdicts).")
    rho, lo, hi, n = result.rho
    if np.isfinite(rho):
        text += (f" Rank correlation with the clinicians' Bradley-Terry: rho ="
                 f" {fmt_ci(rho, lo, hi)} over {n} models.")
    inc = result.inconsistent.iloc[0]
    if inc["n"]:
        share = fmt_ci(inc["inconsistent_pct"], inc["inconsistent_pct_lo"],
                       inc["inconsistent_pct_hi"], 1, "%")
        text += (f" {int(inc['inconsistent']):,} of {int(inc['n']):,} pairs judged in both"
                 f" orders changed verdict with the order ({share}).")
    return text


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "The pairwise judge's Bradley-Terry strengths, rank intervals and win rates beside the"
    " clinicians', their rank correlation, and pairs whose verdict changes with the order.",
    section, uses_preferences=True, needs_judgments=True)
