"""Preference strengths with bootstrap CIs, rank intervals, win and 'both
unacceptable' rates."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, json_list, row_ci, wilson_pct
from clinieval.audit.preference import Preferences, no_votes, rank_interval, unbounded_note
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import A_WINS, B_WINS, BOTH_BAD

KEY, TITLE = "bradley_terry", "Bradley-Terry preference strengths"


@dataclass(frozen=True)
class BradleyTerry:
    """Per model (index = model code; NaN when not fitted): strength with its
    bootstrap interval, rank with its interval, votes between two different
    models, wins and 'both unacceptable' votes. ``design`` names what the
    bootstrap resampled; ``notes`` are sentences about what the resampling or
    the fit could not do."""

    strength: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rank: np.ndarray
    rank_lo: np.ndarray
    rank_hi: np.ndarray
    votes: np.ndarray
    wins: np.ndarray
    both_bad: np.ndarray
    n_votes: int
    leader: int | None
    no_leader: str
    design: str
    notes: str


def compute(ctx: Context, prefs: Preferences) -> BradleyTerry | Skipped:
    if not prefs.available:
        return no_votes(prefs)
    d, m = ctx.data, ctx.data.n_models
    lo, hi = ctx.ci(prefs.replicates)
    a, b = ctx.vote_models
    a, b, o = a[ctx.bt_votes], b[ctx.bt_votes], d.pref_outcome[ctx.bt_votes]
    votes = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    both_bad = np.bincount(a, o == BOTH_BAD, m) + np.bincount(b, o == BOTH_BAD, m)
    wins = np.bincount(a, o == A_WINS, m) + np.bincount(b, o == B_WINS, m)
    return BradleyTerry(prefs.strengths, lo, hi, *prefs.ranks, votes, wins, both_bad,
                        prefs.n_votes, prefs.leader, prefs.no_leader, prefs.design,
                        prefs.note + unbounded_note(ctx, prefs))


def present(result: BradleyTerry, ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    frame = pd.DataFrame({"model": d.model_names})
    frame = estimate(frame, "bt", result.strength, result.lo, result.hi)
    frame["rank"], frame["rank_lo"], frame["rank_hi"] = (result.rank, result.rank_lo,
                                                         result.rank_hi)
    frame["n"] = result.votes
    frame = wilson_pct(frame, "win_pct", result.wins, result.votes, s.level)
    frame = wilson_pct(frame, "both_bad_pct", result.both_bad, result.votes, s.level)
    frame = frame.sort_values("bt", ascending=False, kind="stable").reset_index(drop=True)
    fig = Figure("bt_forest", "Bradley-Terry strength with bootstrap CI", Forest(
        labels=frame["model"].tolist(), est=json_list(frame["bt"]), lo=json_list(frame["bt_lo"]),
        hi=json_list(frame["bt_hi"]), n=frame["n"].tolist(), x_label="log-strength (centred)",
        ref=0.0),
        caption=f"{result.n_votes:,} votes; {s.bootstrap} bootstrap resamples of {result.design}.")
    top = frame.iloc[0]
    counted = (f" over {result.n_votes:,} votes; ties count"
               f" {'half a win each' if s.ties == 'half' else 'not at all'}, 'both unacceptable'"
               f" {'half a win each' if s.both_bad == 'half' else 'not at all'}.")
    if result.leader is None:
        summary = f"No model leads the preference ranking{counted[:-1]}: {result.no_leader}."
    else:
        summary = (f"{top['model']} leads the preference ranking (strength"
                   f" {row_ci(top, 'bt')}, {rank_interval(top)}){counted}")
    summary += result.notes
    unfitted = [d.model_names[m] for m in range(d.n_models) if np.isnan(result.strength[m])]
    if unfitted:
        summary += f" Not ranked (no decisive votes): {', '.join(unfitted)}."
    total = int(result.votes.sum()) // 2
    share = float(result.both_bad.sum() / 2 / total) if total else None
    return Section(KEY, TITLE, summary, {"strengths": frame}, [fig],
                   {"n_votes": result.n_votes,
                    "leader": None if result.leader is None else top["model"],
                    "both_bad_share": share})


def section(ctx: Context, prefs: Preferences) -> Section:
    return run_section(KEY, TITLE, compute(ctx, prefs), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Preference strengths with bootstrap CIs, rank intervals, win and"
    " 'both unacceptable' rates.",
    section, uses_preferences=True)
