"""Whether the answer shown on the left wins more often than chance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import row_pct, wilson_pct
from clinieval.audit.result import Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import A_WINS, B_WINS, binomial_p_value

KEY, TITLE = "position_bias", "Position bias"
MIN_VOTES = 10
DECIDED = (A_WINS, B_WINS)


@dataclass(frozen=True)
class PositionBias:
    """Decided votes whose screen side is known, how many the left answer
    won, the exact binomial p against 1/2, and the share of undecided votes."""

    n: int
    left_won: int
    p_value: float
    undecided_share: float


def compute(ctx: Context) -> PositionBias | Skipped:
    d = ctx.data
    sided = d.pref_left_is_a >= 0
    known = sided & np.isin(d.pref_outcome, DECIDED)
    n = int(known.sum())
    if n < MIN_VOTES:
        return Skipped("needs votes that record which answer was shown on the left; found"
                       f" {n} decided ones.")
    left_won = int(np.sum((d.pref_outcome[known] == A_WINS) == (d.pref_left_is_a[known] == 1)))
    undecided = float(np.mean(~np.isin(d.pref_outcome[sided], DECIDED)))
    return PositionBias(n, left_won, binomial_p_value(left_won, n), undecided)


def present(result: PositionBias, ctx: Context) -> Section:
    frame = wilson_pct(pd.DataFrame({"measure": ["left answer wins"]}), "share_pct",
                       [result.left_won], [result.n], ctx.settings.level)
    frame["n"] = result.n
    frame["p_value"] = result.p_value
    row = frame.iloc[0]
    detected = bool(row["share_pct_lo"] > 50 or row["share_pct_hi"] < 50)
    side = "left" if row["share_pct"] > 50 else "right"
    summary = (f"The answer shown on the left won {row_pct(row, 'share_pct')} of"
               f" {result.n:,} decided votes: "
               + (f"a {side}-position bias is detected (binomial p = {result.p_value:.2g})."
                  if detected else "no position bias is detected."))
    return Section(KEY, TITLE, summary, {"position": frame}, [],
                   {"left_wins_pct": float(row["share_pct"]), "detected": detected,
                    "tie_or_both_bad_share": result.undecided_share, "n": result.n})


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Whether the answer shown on the left wins more often.",
    section, headline=50)
