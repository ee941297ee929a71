"""The Bradley-Terry fit shared by the sections that use votes: strengths,
bootstrap replicates, ranks and the preference leader (see
:mod:`clinieval.audit.sections` for the sections themselves)."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from clinieval.audit.context import Context
from clinieval.audit.result import Skipped
from clinieval.stats import (
    A_WINS,
    B_WINS,
    bt_bootstrap,
    bt_cluster_bootstrap,
    bt_fit,
    bt_twoway_bootstrap,
    cluster_outcome_tables,
    collapse_votes,
    outcome_table,
    rank_intervals,
    unique_codes,
    vote_credits,
)

MIN_VOTES = 10
LEVEL = 1e-6  # strengths closer than this (log scale) are level: no leader between them
DECIDED = (A_WINS, B_WINS)


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
        if ctx.settings.cluster == "rater" and unique_codes(raters).size == 1 and raters[0] >= 0:
            self.note = (" A bootstrap over raters needs at least two raters and the votes come"
                         " from one, so Bradley-Terry intervals are not computable.")
            return self.embed(np.full((B, m), np.nan))
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
        # unique_codes: numpy's np.unique hashes, far slower for these at 100x
        if unique_codes(raters).size < 2 and unique_codes(cases).size < 2:
            self.note = (" A two-way bootstrap needs at least two raters or two cases and the"
                         " votes come from one rater on one case, so Bradley-Terry intervals"
                         " are not computable.")
            return np.full((B, len(self.active)), np.nan)
        return bt_twoway_bootstrap(a, b, o, raters, cases, len(self.active), B, rng,
                                   **self.modes)

    @property
    def design(self) -> str:
        """The resampling unit of the Bradley-Terry intervals, in words."""
        cluster = self.ctx.settings.cluster
        if cluster == "rater" and (self.ctx.data.pref_rater[self.credited] < 0).any():
            return "votes"  # the rater bootstrap fell back to votes (see ``note``)
        return {"twoway": "raters and cases together (two-way)",
                "rater": "raters"}.get(cluster, "votes")

    @cached_property
    def ranks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rank (1 = strongest) and rank interval; NaN for models not fitted,
        and NaN bounds when the replicates are not computable."""
        reps = self.replicates[:, self.active]
        rank, lower, upper = (np.asarray(x, dtype=float) for x in rank_intervals(
            self.strengths[self.active], np.nan_to_num(reps), self.ctx.settings.level))
        if not np.isfinite(reps).all():
            lower, upper = np.full_like(lower, np.nan), np.full_like(upper, np.nan)
        return self.embed(rank), self.embed(lower), self.embed(upper)

    @cached_property
    def leader(self) -> int | None:
        """The strongest model, or None when the strongest two are level (then
        :attr:`no_leader` says why)."""
        fitted = np.sort(self.strengths[self.active])[::-1]
        if fitted.size < 2 or fitted[0] - fitted[1] < LEVEL:
            return None
        return int(np.nanargmax(self.strengths))

    @property
    def no_leader(self) -> str:
        if len(self.active) < 2:
            return "fewer than two models take part in decisive votes"
        return ("the strongest models have the same preference strength (for instance when"
                " every vote is a tie or 'both unacceptable')")


def unbounded_note(ctx: Context, prefs: Preferences) -> str:
    """Models that won or lost every decisive vote have no finite maximum-
    likelihood strength; say so instead of presenting the penalised value."""
    a, b, o = prefs.votes
    credit_a, credit_b = vote_credits(o, **prefs.modes)
    m = len(prefs.active)
    credit = np.bincount(a, credit_a, m) + np.bincount(b, credit_b, m)
    total = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    extreme = [ctx.data.model_names[prefs.active[i]] for i in range(m)
               if credit[i] in (0, total[i])]
    if not extreme:
        return ""
    return (f" {', '.join(extreme)} won or lost every vote they took part in, so their strength"
            " has no finite estimate: the value shown is held in place by the fit's small"
            " penalty, and only the order is meaningful.")


def rank_interval(row) -> str:
    if not (np.isfinite(row["rank_lo"]) and np.isfinite(row["rank_hi"])):
        return "rank interval not computable"
    return f"rank interval {int(row['rank_lo'])}-{int(row['rank_hi'])}"


def no_votes(prefs: Preferences) -> Skipped:
    """Why a section that needs a Bradley-Terry fit is skipped."""
    return Skipped(f"needs at least {MIN_VOTES} pairwise votes between different models; this"
                   f" snapshot has {prefs.n_votes}.")
