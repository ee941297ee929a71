"""How far clinicians agree per criterion (Fleiss' kappa, ordinal
Krippendorff's alpha, kappa on fail/pass) and how dispersed their scores are."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.data import N_SCORES
from clinieval.audit.formatting import estimate, json_list, row_ci
from clinieval.audit.result import Bars, Figure, Heatmap, Section
from clinieval.audit.sections._common import Estimate, SectionSpec, Skipped, run_section
from clinieval.stats import (
    fleiss_kappa_weighted,
    krippendorff_alpha_weighted,
    merge_identical_rows,
    resample_counts,
    resample_shared_counts,
    shared_resample_cheaper,
)

KEY, TITLE = "reliability", "Inter-rater reliability"
MIN_ITEMS = 10
SHARED_ENTRIES = 2**23  # resampled pattern counts of all criteria drawn together, at most
UNDEFINED_KAPPA = ("kappa and alpha are undefined when every rating of a criterion has the same"
                   " score: there is no variation, so agreement cannot be told from chance")


@dataclass(frozen=True)
class Agreement:
    """Agreement on one criterion over the answers it has at least two ratings for."""

    criterion: str
    n_items: int
    n_ratings: int
    fleiss_kappa: Estimate
    krippendorff_alpha_ordinal: Estimate
    fail_kappa: Estimate


@dataclass(frozen=True)
class Dispersion:
    """(models, criteria) mean within-answer SD over answers with two ratings
    or more (NaN without any), its interval (lo, hi) and how many answers
    that mean covers."""

    criteria: list[str]
    mean_sd: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray


@dataclass(frozen=True)
class Reliability:
    agreement: list[Agreement]
    dispersion: Dispersion


def compute(ctx: Context) -> Reliability | Skipped:
    counts = ctx.answer_counts
    multi = ctx.answer_n >= 2
    if multi.sum() < MIN_ITEMS:
        return Skipped(f"needs at least {MIN_ITEMS} answers rated on a criterion by two or more"
                       f" clinicians; found {int(multi.sum())} such (answer, criterion) sets.")
    chosen = [c for c in ctx.criteria if multi[:, c].sum() >= MIN_ITEMS]
    if not chosen:
        most = int(multi[:, ctx.criteria].sum(axis=0).max())
        return Skipped(f"needs a criterion with at least {MIN_ITEMS} answers rated by two or"
                       f" more clinicians; the most any analysed criterion has is {most}.")
    # Only the distinct patterns are kept: each criterion's items (answers)
    # are read from the counts again when needed (they would take a lot of
    # memory at scale).
    merged = {c: merge_identical_rows(_items(counts, multi, c)) for c in chosen}
    shared = _shared_weights(ctx, multi, merged)
    # A criterion drawn alone gets its multiplicities only when its row is
    # built, so one criterion's (B, patterns) draws are in memory at a time.
    rows = [_agreement(ctx, c, *merged[c], shared.pop(c) if c in shared else resample_counts(
        merged[c][1], ctx.settings.bootstrap, ctx.rng(f"reliability/{c}"))) for c in chosen]
    return Reliability(rows, _dispersion(ctx))


def _items(counts: np.ndarray, multi: np.ndarray, c: int) -> np.ndarray:
    """(answers rated at least twice on criterion ``c``, 5) score counts."""
    return counts[multi[:, c], c].astype(np.int64)


def _shared_weights(ctx: Context, multi: np.ndarray, merged: dict) -> dict:
    """Per criterion rated on the same answers as others, ``(B, patterns)``
    resampled multiplicities of its distinct count patterns from one
    resample of those answers shared by the criteria (an item bootstrap),
    when that is cheaper than each criterion's own multinomial (usually: one
    draw per answer for all criteria instead of each criterion's own draws)
    and the criteria's draws together stay within
    :data:`SHARED_ENTRIES`. Each criterion's multiplicities have the same
    multinomial distribution as alone, and every criterion's interval then
    resamples the same answers. Criteria not returned are drawn alone."""
    B, weights, groups = ctx.settings.bootstrap, {}, {}
    for c in merged:
        groups.setdefault(np.packbits(multi[:, c]).tobytes(), []).append(c)
    for group in groups.values():
        sizes = [merged[c][1].size for c in group]
        if B * sum(sizes) > SHARED_ENTRIES or not shared_resample_cheaper(
                [merged[c][1] for c in group]):
            continue
        codes = np.column_stack([merge_identical_rows(
            _items(ctx.answer_counts, multi, c), return_inverse=True)[2] for c in group])
        draws = resample_shared_counts(codes, sizes, B, ctx.rng(f"reliability/{group[0]}"))
        weights.update(zip(group, draws, strict=True))
    return weights


def _agreement(ctx: Context, c: int, patterns: np.ndarray, freq: np.ndarray,
               weights: np.ndarray) -> Agreement:
    """Point estimates plus item-bootstrap CIs. Items with the same count
    pattern are merged and resampled as multinomial weights (``weights``,
    ``(B, patterns)``), so the statistics cost per distinct pattern, not per
    answer."""
    # The point estimate is the statistic with every pattern weighted by its
    # frequency (exact), then the same statistic on each resample's weights.
    both = np.vstack([freq[None], weights], dtype=float)
    binary = _fail_pass(ctx, patterns)
    values = np.column_stack([fleiss_kappa_weighted(patterns, both),
                              krippendorff_alpha_weighted(patterns, both, "ordinal"),
                              fleiss_kappa_weighted(binary, both)])
    return Agreement(ctx.name(c), int(freq.sum()), int(freq @ patterns.sum(axis=1)),
                     *_with_cis(ctx, values))


def _with_cis(ctx: Context, values: np.ndarray) -> list[Estimate]:
    """:func:`_with_ci` of each column; when every replicate is finite the
    columns' quantiles come from one call (the same values, column by
    column)."""
    reps = values[1:]
    if not np.isfinite(reps).all():
        return [_with_ci(ctx, column) for column in values.T]
    lo, hi = ctx.ci(reps)
    return [Estimate(float(v), float(a), float(b)) for v, a, b in zip(values[0], lo, hi,
                                                                       strict=True)]


def _fail_pass(ctx: Context, items: np.ndarray) -> np.ndarray:
    """Score counts collapsed to (failing, passing) counts."""
    return np.column_stack([items[:, : ctx.fail_slots].sum(1), items[:, ctx.fail_slots:].sum(1)])


def _with_ci(ctx: Context, values: np.ndarray) -> Estimate:
    """``values[0]`` is the estimate, the rest its bootstrap replicates."""
    reps = values[1:]
    lo, hi = ctx.ci(reps[np.isfinite(reps)]) if np.isfinite(reps).any() else (np.nan, np.nan)
    return Estimate(float(values[0]), float(lo), float(hi))


def _dispersion(ctx: Context) -> Dispersion:
    n, mean_sd, lo, hi = ctx.answer_mean_ci(ctx.answer_std[:, ctx.criteria], ctx.criteria)
    return Dispersion([ctx.name(c) for c in ctx.criteria], mean_sd, lo, hi, n.astype(int))


def present(result: Reliability, ctx: Context) -> Section:
    frame = _agreement_table(result.agreement)
    fig = Figure("reliability", "Fleiss' kappa by criterion", Bars(
        labels=frame["criterion"].tolist(), est=json_list(frame["fleiss_kappa"]),
        lo=json_list(frame["fleiss_kappa_lo"]), hi=json_list(frame["fleiss_kappa_hi"]),
        n=frame["n_items"].tolist(), y_label=f"Fleiss' kappa ({N_SCORES} categories)"),
        caption="Bootstrap CIs resample answers. 0 = chance agreement, 1 = perfect.")
    kappa = {a.criterion: a.fleiss_kappa.value for a in result.agreement
             if np.isfinite(a.fleiss_kappa.value)}
    return Section(KEY, TITLE, _summary(frame), {"agreement": frame,
                                                  "dispersion": _dispersion_table(result, ctx)},
                   [fig, _dispersion_figure(result.dispersion, ctx)], {"kappa": kappa})


def _agreement_table(rows: list[Agreement]) -> pd.DataFrame:
    frame = pd.DataFrame({"criterion": [r.criterion for r in rows],
                          "n_items": [r.n_items for r in rows],
                          "n_ratings": [r.n_ratings for r in rows]})
    for name in ("fleiss_kappa", "krippendorff_alpha_ordinal", "fail_kappa"):
        values = [getattr(r, name) for r in rows]
        frame = estimate(frame, name, [v.value for v in values], [v.lo for v in values],
                         [v.hi for v in values])
    return frame


def _dispersion_table(result: Reliability, ctx: Context) -> pd.DataFrame:
    """Long form: one row per model and criterion with the mean SD and its CI."""
    disp = result.dispersion
    models, criteria = np.meshgrid(ctx.data.model_names, disp.criteria, indexing="ij")
    frame = pd.DataFrame({"model": models.ravel(), "criterion": criteria.ravel(),
                          "n_answers": disp.n.ravel()})
    frame = estimate(frame, "mean_sd", disp.mean_sd.ravel(), disp.lo.ravel(), disp.hi.ravel())
    return frame[frame["n_answers"] > 0].reset_index(drop=True)


def _summary(frame: pd.DataFrame) -> str:
    defined = frame[np.isfinite(frame["fleiss_kappa"])]
    undefined = frame.loc[~np.isfinite(frame["fleiss_kappa"]), "criterion"].tolist()
    note = f" Not computable for {', '.join(undefined)}: {UNDEFINED_KAPPA}." if undefined else ""
    if defined.empty:
        return f"Agreement between clinicians is not computable: {UNDEFINED_KAPPA}."
    lo_row = defined.loc[defined["fleiss_kappa"].idxmin()]
    hi_row = defined.loc[defined["fleiss_kappa"].idxmax()]
    if len(defined) == 1:
        return (f"Agreement on {hi_row['criterion']}: Fleiss kappa"
                f" {row_ci(hi_row, 'fleiss_kappa')}." + note)
    return (f"Agreement is highest on {hi_row['criterion']} (Fleiss kappa"
            f" {row_ci(hi_row, 'fleiss_kappa')}) and lowest on {lo_row['criterion']}"
            f" ({row_ci(lo_row, 'fleiss_kappa')}); an average over criteria would hide"
            " this." + note)


def _dispersion_figure(dispersion: Dispersion, ctx: Context) -> Figure:
    values = [[None if not np.isfinite(v) else float(v) for v in row]
              for row in dispersion.mean_sd]
    return Figure("dispersion", "Mean within-answer SD by model and criterion", Heatmap(
        rows=ctx.data.model_names, cols=dispersion.criteria, values=values,
        n=dispersion.n.tolist(), value_label="mean SD (score points)", scale="sequential"),
        caption="Answers with at least two ratings; higher = clinicians disagree more. CIs"
        f" (in the table): {ctx.answer_mean_design}.")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Agreement between clinicians per criterion (Fleiss, Krippendorff, fail/pass"
    " kappa) and dispersion.",
    section, releases=("rating_cells",), headline=60)
