"""Whether clinicians disagree more on longer prompts."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, json_list
from clinieval.audit.result import Figure, Line, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import Correlation, group_mean_ci, spearman

KEY, TITLE = "consensus_drift", "Consensus drift with prompt length"


@dataclass(frozen=True)
class ConsensusDrift:
    """Cases binned by prompt length (quantile ``edges``), the mean
    disagreement per bin with its normal interval, and Spearman's rho over
    cases. ``answers`` counts the answers the case means are taken over."""

    edges: np.ndarray
    n: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rho: Correlation
    answers: int


def compute(ctx: Context) -> ConsensusDrift | Skipped:
    d, s = ctx.data, ctx.settings
    if not np.isfinite(d.answer_prompt_words).any():
        return Skipped("prompt lengths are unknown: the cases carry neither prompt_words nor"
                       " prompt text.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # answers with no multi-rated criterion
        disagreement = np.nanmean(ctx.answer_std[:, ctx.criteria], axis=1)
    ok = np.isfinite(disagreement) & np.isfinite(d.answer_prompt_words)
    # Answers to one case share its prompt length: the unit is the case, with
    # the mean disagreement over its answers, so n and p are not inflated.
    cases = np.unique(d.answer_case[ok], return_inverse=True)[1]
    per_case = np.bincount(cases, minlength=cases.max() + 1 if cases.size else 0)
    if per_case.size < 2 * s.length_bins:
        return Skipped(f"needs at least {2 * s.length_bins} cases (two per prompt-length bin)"
                       " with a prompt length and an answer rated by several clinicians; found"
                       f" {per_case.size}.")
    y = np.bincount(cases, weights=disagreement[ok]) / per_case
    x = np.bincount(cases, weights=d.answer_prompt_words[ok]) / per_case
    edges = np.unique(np.quantile(x, np.linspace(0, 1, s.length_bins + 1)))
    if edges.size < 2:
        return Skipped(f"every usable case has the same prompt length ({edges[0]:,.0f} words),"
                       " so there is no length to compare.")
    bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    n, mean, lo, hi = group_mean_ci(bins, y, len(edges) - 1, s.level)
    return ConsensusDrift(edges, n, mean, lo, hi, spearman(x, y), int(ok.sum()))


def present(result: ConsensusDrift, ctx: Context) -> Section:
    frame = pd.DataFrame({"words_from": result.edges[:-1], "words_to": result.edges[1:],
                          "n": result.n})
    frame = estimate(frame, "disagreement", result.mean, result.lo, result.hi)
    rho = result.rho
    fig = Figure(KEY, "Disagreement by prompt length", Line(
        x=((frame["words_from"] + frame["words_to"]) / 2).tolist(),
        y=json_list(frame["disagreement"]), lo=json_list(frame["disagreement_lo"]),
        hi=json_list(frame["disagreement_hi"]), x_label="prompt length (words, bin middle)",
        y_label="mean within-answer SD"),
        caption=f"{rho.n:,} cases (mean over {result.answers:,} answers) in {len(frame)}"
        " quantile bins; normal CIs per bin.")
    return Section(KEY, TITLE, _summary(rho), {"bins": frame}, [fig],
                   {"spearman_rho": rho.r, "spearman_p": rho.p, "n": rho.n})


def _summary(rho: Correlation) -> str:
    if not np.isfinite(rho.r):
        return (f"The trend with prompt length is not computable over {rho.n:,} cases:"
                " disagreement (or prompt length) does not vary between them.")
    trend = "rises" if rho.r > 0 and rho.p < 0.05 else "falls" if rho.r < 0 and rho.p < 0.05 \
        else "shows no clear trend"
    return (f"Disagreement {trend} with prompt length (Spearman rho {rho.r:.2f},"
            f" p = {rho.p:.2g}, n = {rho.n:,} cases).")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Whether clinicians disagree more on longer prompts.",
    section)
