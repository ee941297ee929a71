"""Fail % of ratings for every model and criterion: where each model fails."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clinieval.audit.context import Context
from clinieval.audit.result import Figure, Heatmap, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section

KEY, TITLE = "failure_modes", "Failure-mode profile"


@dataclass(frozen=True)
class FailureModes:
    """(models, criteria) Fail % of ratings (NaN unrated) and rating counts."""

    criteria: list[str]
    fail_pct: np.ndarray
    n: np.ndarray


def compute(ctx: Context) -> FailureModes | Skipped:
    if not ctx.criteria:
        return Skipped("the snapshot has no rubric ratings.")
    names = [ctx.name(c) for c in ctx.criteria]
    pct = ctx.model_fail_pct[:, ctx.criteria]
    if not np.isfinite(pct).any():
        return Skipped(f"the analysed criteria ({', '.join(names)}) have no ratings.")
    return FailureModes(names, pct, ctx.model_n[:, ctx.criteria])


def present(result: FailureModes, ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    pct, n = result.fail_pct, result.n
    fig = Figure(KEY, f"Fail % of ratings (ratings <= {s.threshold}) by model and criterion",
                 Heatmap(rows=d.model_names, cols=result.criteria, values=grid(pct),
                         n=n.tolist(), value_label="fail % of ratings", scale="percent"),
                 caption="Darker cells fail more often; a positive mean can hide a high Fail %."
                 " n counts ratings.")
    finite = pct[np.isfinite(pct)]
    if finite.min() == finite.max():
        return Section(KEY, TITLE, "Every rated model and criterion has the same Fail % of"
                       f" ratings ({finite[0]:.1f}%), so no failure mode stands out.", {}, [fig],
                       {"worst": None})
    worst = np.unravel_index(np.nanargmax(pct), pct.shape)
    model, criterion = d.model_names[worst[0]], result.criteria[worst[1]]
    summary = (f"The highest Fail % of ratings is {model} on {criterion}: {pct[worst]:.1f}% of"
               f" {int(n[worst]):,} ratings.")
    return Section(KEY, TITLE, summary, {}, [fig],
                   {"worst": [model, criterion, float(pct[worst])]})


def grid(matrix: np.ndarray) -> list[list[float | None]]:
    """A heatmap's values: floats, None where there is no value."""
    return [[None if not np.isfinite(v) else float(v) for v in row] for row in matrix]


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Fail % of ratings for every model and criterion.",
    section)
