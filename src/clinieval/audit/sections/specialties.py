"""Failure rates per specialty with Wilson CIs (on the two-way effective n
under the two-way design), and the model x specialty no-go-zone heatmap.
Rates count answers, failed by the response rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.failure import ANSWERS_FAILING, DANGEROUS_ANSWERS, rule_words
from clinieval.audit.formatting import row_pct, share_pct
from clinieval.audit.result import Figure, Heatmap, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections.failure_modes import grid

KEY, TITLE = "specialties", "Specialty stratification (no-go zones)"
EXTREMES = 3


@dataclass(frozen=True)
class Specialties:
    """Per specialty (index = specialty code): dangerous answers ``k`` of
    rated ``n`` with the interval of the share (lo, hi; see
    :meth:`Context.answer_share_ci`); per safety-critical criterion id,
    failing answers ``(k, n, lo, hi)``; and the (models, specialties)
    dangerous ``k`` and ``n``."""

    dangerous_k: np.ndarray
    dangerous_n: np.ndarray
    dangerous_lo: np.ndarray
    dangerous_hi: np.ndarray
    failing: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    by_model_k: np.ndarray
    by_model_n: np.ndarray


def compute(ctx: Context) -> Specialties | Skipped:
    d = ctx.data
    if not ctx.safety:
        return Skipped(ctx.why_no_safety)
    spec, n_spec = d.answer_specialty, len(d.specialties)
    dangerous = ctx.answer_share_ci(ctx.answer_dangerous, spec, n_spec)
    failing = {d.criteria[c]: ctx.answer_share_ci(ctx.answer_fail[:, c], spec, n_spec)
               for c in ctx.safety}
    cell = d.answer_model.astype(np.int64) * n_spec + spec
    mk, mn = (x.reshape(d.n_models, n_spec) for x in ctx.rate_by(
        ctx.answer_dangerous, cell, d.n_models * n_spec))
    return Specialties(*dangerous, failing, mk, mn)


def present(result: Specialties, ctx: Context) -> Section:
    s = ctx.settings
    frame = pd.DataFrame({"specialty": ctx.data.specialties, "n": result.dangerous_n})
    for criterion, share in result.failing.items():
        frame = share_pct(frame, f"{criterion}_{ANSWERS_FAILING}", *share)
    frame = share_pct(frame, DANGEROUS_ANSWERS, result.dangerous_k, result.dangerous_n,
                      result.dangerous_lo, result.dangerous_hi)
    frame["ranked"] = frame["n"] >= s.min_n
    frame = frame[frame["n"] > 0].sort_values(["ranked", DANGEROUS_ANSWERS], ascending=False,
                                              kind="stable").reset_index(drop=True)
    ranked = frame[frame["ranked"]]
    highest = ranked.head(EXTREMES)
    rest = ranked.iloc[len(highest):]  # a specialty is never both highest and lowest risk
    lowest = rest.sort_values(DANGEROUS_ANSWERS, kind="stable").head(EXTREMES)
    tables = {"specialties": frame, "highest_risk": highest.reset_index(drop=True),
              "lowest_risk": lowest.reset_index(drop=True)}
    summary = _summary(frame, highest, lowest, s.min_n) + (
        f" Rates count answers: {rule_words(s.response_rule, s.threshold)}; n counts rated"
        f" answers. CIs: {_interval_words(s.cluster)}.")
    values = {"highest_risk": highest["specialty"].tolist(),
              "lowest_risk": lowest["specialty"].tolist(),
              "ranked": int(frame["ranked"].sum()), "unranked": int((~frame["ranked"]).sum())}
    return Section(KEY, TITLE, summary, tables, [_nogo_heatmap(result, ctx)], values)


def _interval_words(cluster: str) -> str:
    if cluster == "twoway":
        return ("Wilson over answers on the two-way (raters x cases) design-effect-adjusted"
                " n")
    return "Wilson over answers"


def _summary(frame, highest, lowest, min_n) -> str:
    if highest.empty:
        return f"No specialty reaches {min_n} rated answers, so none is ranked."
    top = highest.iloc[0]
    text = (f"Highest risk: {top['specialty']} with dangerous answers % "
            f"{row_pct(top, DANGEROUS_ANSWERS)} of {int(top['n']):,} answers.")
    if not lowest.empty:
        low = lowest.iloc[0]
        text += (f" Lowest: {low['specialty']} "
                 f"({row_pct(low, DANGEROUS_ANSWERS)}, n = {int(low['n']):,}).")
    unranked = int((~frame["ranked"]).sum())
    if unranked:
        text += f" {unranked} specialties have fewer than {min_n} answers and are not ranked."
    return text


def _nogo_heatmap(result: Specialties, ctx: Context) -> Figure:
    d, s = ctx.data, ctx.settings
    k, n = result.by_model_k, result.by_model_n
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(n > 0, 100 * k / n, np.nan)
    order = np.argsort(-np.nan_to_num(100 * k.sum(0) / np.maximum(n.sum(0), 1)), kind="stable")
    return Figure("nogo_heatmap", "Dangerous answers % by model and specialty", Heatmap(
        rows=d.model_names, cols=[d.specialties[i] for i in order],
        values=grid(pct[:, order]), n=n[:, order].astype(int).tolist(),
        value_label="dangerous answers %", scale="percent", mask_below=s.min_n),
        caption=f"Cells with fewer than {s.min_n} answers are hatched: too few to call.")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Answers failing % and dangerous answers % per specialty with Wilson CIs;"
    " the no-go-zone heatmap.",
    section, headline=30)
