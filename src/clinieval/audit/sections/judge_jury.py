"""The jury's composite per model and each juror's, so a reader sees which
juror pulls the verdict.

- Composite (MedHELM): the mean of every juror's every axis score on the
  jury's 1..5 scale, per model, with the pigeonhole bootstrap of cases and
  jurors.
- Per juror and model: the juror's composite and its pull, the juror's
  composite minus the mean of the other jurors' on the same model, with a
  bootstrap of cases that draws every juror's scores together.
- Agreement: ICC(3,k) after z-scoring each juror (MedHELM's ICC3k-z) of the
  jurors' per-answer composites, and the same without each juror in turn;
  bootstrap intervals over answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, fmt_ci, json_list
from clinieval.audit.judged import judged
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections._judge_rows import JURY_SCALE, cell_arrays, judge_rows
from clinieval.stats import (
    bootstrap_icc3k_z,
    cluster_bootstrap_ratio,
    icc3k_z,
    twoway_ratio_bootstrap,
)

KEY, TITLE = "judge_jury", "Jury and its jurors"
SCALE = f"jury's {JURY_SCALE[0]}..{JURY_SCALE[1]}"


def _composite(ctx: Context, rows: pd.DataFrame) -> pd.DataFrame:
    models, code = np.unique(rows["model"].to_numpy(), return_inverse=True)
    rows = rows.assign(group=code)
    sums, counts = cell_arrays(rows, "group", models.size, "score")
    lo, hi = ctx.ci(twoway_ratio_bootstrap(sums, counts, ctx.settings.bootstrap,
                                           ctx.rng(f"{KEY}:composite")))
    by = rows.groupby("group")
    frame = pd.DataFrame({"model": [ctx.data.model_names[m] for m in models]})
    frame = estimate(frame, "jury_composite", by["score"].mean(), lo, hi)
    frame["n"], frame["cases"] = by.size().to_numpy(), by["case"].nunique().to_numpy()
    frame["jurors"] = by["rater"].nunique().to_numpy()
    return frame


def _jurors(ctx: Context, rows: pd.DataFrame) -> pd.DataFrame:
    """Each juror's composite and pull per model (case bootstrap, all jurors
    of a model drawn on the same cases)."""
    jurors = sorted(rows["rater"].unique())
    out = []
    for model, g in rows.groupby("model"):
        case, n_cases = pd.factorize(g["case"])[0], g["case"].nunique()
        juror = pd.Index(jurors).get_indexer(g["rater"])
        flat = case * len(jurors) + juror
        size = n_cases * len(jurors)
        sums = np.bincount(flat, g["score"].to_numpy(float), size).reshape(n_cases, -1)
        counts = np.bincount(flat, minlength=size).reshape(n_cases, -1).astype(float)
        reps = cluster_bootstrap_ratio(sums, counts, ctx.settings.bootstrap,
                                       ctx.rng(f"{KEY}:jurors:{model}"))
        means = sums.sum(axis=0) / np.maximum(counts.sum(axis=0), 1)
        for j, name in enumerate(jurors):
            if counts[:, j].sum() == 0:
                continue
            out.append(_juror_row(ctx, model, name, j, means, reps, counts[:, j]))
    return pd.DataFrame(out)


def _juror_row(ctx: Context, model: int, juror: str, j: int, means: np.ndarray,
               reps: np.ndarray, counts: np.ndarray) -> dict:
    others = np.delete(np.arange(means.size), j)
    pull = means[j] - means[others].mean() if others.size else np.nan
    pull_reps = reps[:, j] - reps[:, others].mean(axis=1) if others.size else reps[:, j] * np.nan
    lo, hi = ctx.ci(reps[:, j])
    p_lo, p_hi = ctx.ci(pull_reps[np.isfinite(pull_reps)]) if np.isfinite(pull_reps).any() \
        else (np.nan, np.nan)
    return {"juror": juror, "model": ctx.data.model_names[model], "composite": means[j],
            "composite_lo": lo, "composite_hi": hi, "pull": pull, "pull_lo": p_lo,
            "pull_hi": p_hi, "n": int(counts.sum()), "cases": int((counts > 0).sum())}


def _agreement(ctx: Context, rows: pd.DataFrame) -> pd.DataFrame:
    """ICC3k-z of the jurors' per-answer composites (answers every juror
    scored), and without each juror in turn."""
    table = rows.groupby(["answer", "rater"])["score"].mean().unstack().dropna()
    if table.shape[1] < 2 or len(table) < 3:
        return pd.DataFrame()
    drops = [None] + (list(table.columns) if table.shape[1] > 2 else [])
    out = []
    for drop in drops:
        part = table.drop(columns=drop) if drop else table
        reps = bootstrap_icc3k_z(part.to_numpy(), ctx.settings.bootstrap,
                                 ctx.rng(f"{KEY}:icc:{drop}"))
        reps = reps[np.isfinite(reps)]
        lo, hi = ctx.ci(reps) if reps.size else (np.nan, np.nan)
        out.append({"jurors": "all" if drop is None else f"without {drop}",
                    "icc3k_z": icc3k_z(part.to_numpy()), "icc3k_z_lo": lo, "icc3k_z_hi": hi,
                    "k": part.shape[1], "n": len(part)})
    return pd.DataFrame(out)


@dataclass(frozen=True)
class Jury:
    composite: pd.DataFrame
    jurors: pd.DataFrame
    agreement: pd.DataFrame


def compute(ctx: Context) -> Jury | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    rows = judge_rows(ctx, data, ("jury",)).rows  # (the jury's rows only: no rubric copy)
    if rows.empty:
        return Skipped("needs parsed jury judgments of known answers; found none.")
    return Jury(_composite(ctx, rows), _jurors(ctx, rows), _agreement(ctx, rows))


def present(result: Jury, ctx: Context) -> Section:
    comp = result.composite.sort_values("jury_composite", ascending=False,
                                        kind="stable").reset_index(drop=True)
    figures = [Figure(f"{KEY}_composite", "Jury composite per model", Forest(
        labels=comp["model"].tolist(), est=json_list(comp["jury_composite"]),
        lo=json_list(comp["jury_composite_lo"]), hi=json_list(comp["jury_composite_hi"]),
        n=comp["n"].astype(int).tolist(), x_label=f"mean of all jurors and axes ({SCALE})"),
        caption="Pigeonhole bootstrap of cases and jurors; n counts parsed scores.")]
    jurors = result.jurors
    if len(jurors):
        figures.append(Figure(f"{KEY}_pull", "Each juror's pull per model", Forest(
            labels=[f"{m} · {j}" for m, j in zip(jurors["model"], jurors["juror"],
                                                 strict=True)],
            est=json_list(jurors["pull"]), lo=json_list(jurors["pull_lo"]),
            hi=json_list(jurors["pull_hi"]), n=jurors["n"].astype(int).tolist(),
            x_label=f"juror minus the other jurors ({SCALE} points)", ref=0.0),
            caption="Bootstrap of cases, every juror drawn on the same cases; n counts the"
            " juror's parsed scores."))
    tables = {"composite": comp, "jurors": jurors, "agreement": result.agreement}
    return Section(KEY, TITLE, _summary(result, comp), {k: v for k, v in tables.items()
                                                         if len(v)}, figures,
                   _values(result))


def _strongest_pull(jurors: pd.DataFrame) -> pd.Series | None:
    clear = jurors[(jurors["pull_lo"] > 0) | (jurors["pull_hi"] < 0)]
    return None if clear.empty else clear.loc[clear["pull"].abs().idxmax()]


def _summary(result: Jury, comp: pd.DataFrame) -> str:
    top = comp.iloc[0]
    text = (f"Jury composite highest for {top['model']}"
            f" {fmt_ci(top['jury_composite'], top['jury_composite_lo'], top['jury_composite_hi'])}"
            f" ({SCALE}, n = {int(top['n']):,} scores).")
    if len(result.agreement):
        row = result.agreement.iloc[0]
        text += (f" Jurors agree at ICC3k-z"
                 f" {fmt_ci(row['icc3k_z'], row['icc3k_z_lo'], row['icc3k_z_hi'])}"
                 f" (k = {int(row['k'])}, n = {int(row['n']):,} answers).")
    pull = _strongest_pull(result.jurors) if len(result.jurors) else None
    if pull is not None:
        text += (f" Strongest pull: {pull['juror']} on {pull['model']}"
                 f" {fmt_ci(pull['pull'], pull['pull_lo'], pull['pull_hi'], signed=True)}"
                 " points against the other jurors.")
    return text


def _values(result: Jury) -> dict:
    pull = _strongest_pull(result.jurors) if len(result.jurors) else None
    return {"models": len(result.composite),
            "strongest_pull": None if pull is None else {
                "juror": pull["juror"], "model": pull["model"], "pull": float(pull["pull"])}}


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "The jury's composite per model and each juror's, each juror's pull against the"
    " others, and the jurors' agreement (ICC3k-z, also without each juror).",
    section, needs_judgments=True)
