"""Run-to-run spread of each judge per model (CSEDB's repeats): among units
judged more than once by the same judge (same answer, criterion or rule,
juror and order), the pooled within-unit SD of the score and the share of
units whose verdict changed between repeats. Intervals resample cases
(every unit of a case together); n counts units and cases. Only parsed
repeats count: a repeat that did not parse is in the Automated judges
section's counts, not here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import fmt_ci, json_list
from clinieval.audit.judged import combine_codes, judged
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections._judge_rows import judge_labels
from clinieval.stats import cluster_bootstrap_ratio, repeat_spread

KEY, TITLE = "judge_repeats", "Judge repeats"
UNIT = ["judge_kind", "judge_model", "answer_id", "answer_b_id", "criterion_id", "juror",
        "shown_first"]
"""A judged unit whose repeats should agree."""


def _units(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per unit judged at least twice: its spread and whether it
    changed. Only the parsed rows' unit codes and scores are read, and the
    model and case of a repeated unit's first row taken (at 10x, filtering
    and filling the whole frame and a groupby's ``first`` over string
    columns took 0.3 s, for a snapshot without a single repeat)."""
    ok = rows["ok"].to_numpy(bool)
    code = _unit_codes(rows, ok)
    size = np.bincount(code)
    if not (size >= 2).any():
        return pd.DataFrame()
    variance, changed, repeats = repeat_spread(code, rows["score"].to_numpy(float)[ok])
    # Codes run in order of first appearance: a row opens its unit when its
    # code exceeds every earlier one.
    before = np.maximum.accumulate(np.concatenate(([-1], code[:-1])))
    opens = np.flatnonzero(ok)[code > before]
    first = rows[["judge_kind", "judge_model", "model_id", "case_id"]].take(opens[size >= 2])
    return first.reset_index(drop=True).assign(variance=variance,
                                               changed=changed.astype(float), repeats=repeats)


EMPTY_AS_MISSING = ("answer_b_id", "shown_first", "criterion_id")
"""Unit columns where a missing value and the empty text are one value."""


def _unit_codes(rows: pd.DataFrame, ok: np.ndarray) -> np.ndarray:
    """A code per ``ok`` row naming its unit, in order of first appearance
    among those rows (as factorising their :data:`UNIT` tuples would give,
    without building millions of tuples): each column factorised on its own
    and the codes combined into one integer, refactorised only when the
    next column could overflow it (at 10x, refactorising 2.5 M codes after
    each of the seven columns took 0.5 s)."""
    combined, bound = np.zeros(len(rows), dtype=np.int64), 1
    for column in UNIT:
        codes, n = _column_codes(rows[column], column in EMPTY_AS_MISSING)
        combined, bound = combine_codes(combined, bound, codes, n)
    return pd.factorize(combined[ok])[0].astype(np.int64)


def _column_codes(column: pd.Series, empty_as_missing: bool) -> tuple[np.ndarray, int]:
    """Codes of one unit column (a missing value is a value of its own, or
    the empty text's with ``empty_as_missing``) and how many there can be."""
    codes, uniques = pd.factorize(column, use_na_sentinel=empty_as_missing)
    codes = codes.astype(np.int64)
    n = max(len(uniques), 1)
    if empty_as_missing:
        empty = np.flatnonzero(np.asarray(uniques == "", dtype=bool))
        codes[codes < 0] = empty[0] if empty.size else len(uniques)
        n = len(uniques) + 1
    return codes, n


def _spread(ctx: Context, judge: str, model: str, units: pd.DataFrame) -> dict:
    case = pd.factorize(units["case_id"])[0]
    n_cases = case.max() + 1
    sums = np.column_stack([np.bincount(case, units[c].to_numpy(float), n_cases)
                            for c in ("variance", "changed")])
    counts = np.repeat(np.bincount(case, minlength=n_cases)[:, None], 2, axis=1).astype(float)
    reps = cluster_bootstrap_ratio(sums, counts, ctx.settings.bootstrap,
                                   ctx.rng(f"{KEY}:{judge}:{model}"))
    lo, hi = ctx.ci(reps) if n_cases > 1 else (np.full(2, np.nan), np.full(2, np.nan))
    var = units["variance"].mean()
    return {"judge": judge, "model": model, "within_sd": float(np.sqrt(var)),
            "within_sd_lo": float(np.sqrt(lo[0])), "within_sd_hi": float(np.sqrt(hi[0])),
            "changed_pct": 100 * units["changed"].mean(), "changed_pct_lo": 100 * lo[1],
            "changed_pct_hi": 100 * hi[1], "repeats": int(units["repeats"].max()),
            "n": len(units), "cases": int(n_cases)}


def compute(ctx: Context) -> pd.DataFrame | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    units = _units(data.rows)
    if units.empty:
        return Skipped("needs a judge that judged the same answer more than once (repeats);"
                       " every parsed judgment here is a single run.")
    units["judge"] = judge_labels(units["judge_kind"], units["judge_model"])
    rows = [_spread(ctx, judge, data.name(model), g)
            for (judge, model), g in units.groupby(["judge", "model_id"], sort=True)]
    return pd.DataFrame(rows)


def present(frame: pd.DataFrame, ctx: Context) -> Section:
    fig = Figure(KEY, "Verdicts that change between repeats, per judge and model", Forest(
        labels=[f"{m} · {j}" for m, j in zip(frame["model"], frame["judge"], strict=True)],
        est=json_list(frame["changed_pct"]), lo=json_list(frame["changed_pct_lo"]),
        hi=json_list(frame["changed_pct_hi"]), n=frame["n"].astype(int).tolist(),
        x_label="units whose verdict changed between repeats %"),
        caption="A unit is one judge's verdict on one answer and criterion (or rule, or pair"
        " in one order) judged more than once; bootstrap over cases; n counts units.")
    worst = frame.loc[frame["changed_pct"].idxmax()]
    changed = fmt_ci(worst["changed_pct"], worst["changed_pct_lo"], worst["changed_pct_hi"], 1,
                     "%")
    sd = fmt_ci(worst["within_sd"], worst["within_sd_lo"], worst["within_sd_hi"])
    summary = (f"Re-running a judge changed its verdict most often for {worst['judge']} on"
               f" {worst['model']}: {changed} of {int(worst['n']):,} units (within-unit SD"
               f" {sd}).")
    return Section(KEY, TITLE, summary, {"repeats": frame}, [fig],
                   {"most_changed": {"judge": worst["judge"], "model": worst["model"],
                                     "changed_pct": float(worst["changed_pct"])}})


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Run-to-run spread of each judge per model: within-unit SD over repeats and the share"
    " of verdicts that change between repeats.",
    section, needs_judgments=True)
