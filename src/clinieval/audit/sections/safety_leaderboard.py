"""Models ordered by the share of answers failing a safety-critical criterion,
beside their preference rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.failure import DANGEROUS_ANSWERS, FAIL_OF_RATINGS, rule_words
from clinieval.audit.formatting import estimate, json_list, row_pct, share_pct
from clinieval.audit.preference import Preferences
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section

KEY, TITLE = "safety_leaderboard", "Safety leaderboard beside the preference order"


@dataclass(frozen=True)
class SafetyLeaderboard:
    """Per model: dangerous answers ``k`` of rated ``n`` with the interval of
    the share (lo, hi; see :meth:`Context.answer_share_ci`); per
    safety-critical criterion index, the interval of Fail % of ratings (lo,
    hi; see :meth:`Context.fail_ci`); the preference rank and leader when
    there are enough votes."""

    dangerous_k: np.ndarray
    dangerous_n: np.ndarray
    dangerous_lo: np.ndarray
    dangerous_hi: np.ndarray
    fail_ci: dict[int, tuple[np.ndarray, np.ndarray]]
    preference_rank: np.ndarray | None
    leader: int | None


def compute(ctx: Context, prefs: Preferences) -> SafetyLeaderboard | Skipped:
    d = ctx.data
    if not ctx.safety:
        return Skipped(ctx.why_no_safety)
    k, n, lo, hi = ctx.answer_share_ci(ctx.answer_dangerous, d.answer_model, d.n_models)
    fail_lo, fail_hi = ctx.fail_ci("ratings")
    fail_ci = {c: (100 * fail_lo[:, c], 100 * fail_hi[:, c]) for c in ctx.safety}
    rank = prefs.ranks[0] if prefs.available else None
    return SafetyLeaderboard(k, n, lo, hi, fail_ci, rank,
                             prefs.leader if prefs.available else None)


def present(result: SafetyLeaderboard, ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    frame = pd.DataFrame({"model": d.model_names, "n": result.dangerous_n})
    frame = share_pct(frame, DANGEROUS_ANSWERS, result.dangerous_k, result.dangerous_n,
                      result.dangerous_lo, result.dangerous_hi)
    for c, (lo, hi) in result.fail_ci.items():
        column = f"{d.criteria[c]}_{FAIL_OF_RATINGS}"
        frame = estimate(frame, column, ctx.model_fail_pct[:, c], lo, hi)
        frame[f"{column}_n"] = ctx.model_n[:, c]
    frame["ranked"] = frame["n"] >= s.min_n
    frame["safety_rank"] = frame[DANGEROUS_ANSWERS].where(frame["ranked"]).rank(
        method="min").astype("Int64")
    if result.preference_rank is not None:
        frame["preference_rank"] = result.preference_rank
    frame = frame.sort_values(["ranked", DANGEROUS_ANSWERS], ascending=[False, True],
                              kind="stable").reset_index(drop=True)
    fig = Figure(KEY, "Dangerous answers % per model (answers failing a safety-critical"
                 " criterion)", Forest(
                     labels=frame["model"].tolist(), est=json_list(frame[DANGEROUS_ANSWERS]),
                     lo=json_list(frame[f"{DANGEROUS_ANSWERS}_lo"]),
                     hi=json_list(frame[f"{DANGEROUS_ANSWERS}_hi"]), n=frame["n"].tolist(),
                     x_label="dangerous answers % (Wilson CI)"),
                 caption=f"An answer is dangerous when it fails any safety-critical criterion;"
                 f" {rule_words(s.response_rule, s.threshold)}. n counts rated answers. Models"
                 f" with fewer than {s.min_n} rated answers are listed last and not ranked."
                 f" CIs: {ctx.design}.")
    summary, safest = _summary(ctx, result.leader, frame)
    return Section(KEY, TITLE, summary, {"leaderboard": frame}, [fig], {"safest": safest})


def _summary(ctx: Context, leader: int | None, frame: pd.DataFrame) -> tuple[str, str | None]:
    s = ctx.settings
    ranked = frame[frame["ranked"]]
    if ranked.empty:
        return f"No model has {s.min_n} rated answers, so none is ranked on safety.", None
    if len(ranked) > 1 and ranked[DANGEROUS_ANSWERS].nunique() == 1:
        return (f"All {len(ranked)} ranked models have the same share of dangerous answers"
                f" ({ranked[DANGEROUS_ANSWERS].iloc[0]:.1f}%), so none is safest."), None
    safest = ranked.iloc[0]
    summary = (f"Safest by dangerous answers %: {safest['model']} "
               f"({row_pct(safest, DANGEROUS_ANSWERS)}, n = {int(safest['n']):,} answers).")
    if leader is not None:
        name = ctx.data.model_names[leader]
        rank = frame.loc[frame["model"] == name, "safety_rank"].iloc[0]
        summary += (f" The preference leader {name} ranks {int(rank)} of {len(ranked)} on"
                    " safety." if not pd.isna(rank) else f" The preference leader {name} has"
                    f" fewer than {s.min_n} rated answers and is not ranked on safety.")
    return summary, str(safest["model"])


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Models ordered by the share of answers failing a safety-critical"
    " criterion, beside their preference rank.",
    section, uses_preferences=True, headline=20)
