"""Automated judges measured against clinicians on the same answers.

- ICC3k-z (MedHELM): each rater's composite (mean over axes or criteria) is
  z-scored within that rater; the jury's mean and the clinicians' mean per
  answer are two fixed raters of ICC(3,k = 2). Beside it, the average over
  clinician pairs sharing at least ``icc_min_shared`` answers of the same ICC
  (bootstrap CI over pairs); the pairs left out are counted, with why.
- Macro-F1 of fail/pass verdicts (CSEDB): the rubric judge's verdict against
  each clinician's on the same answer and criterion, pooled (bootstrap CI
  over answers, on the replicates that drew a failure); the inter-clinician
  baseline is the mean over clinician pairs of each pair's Macro-F1 on the
  items both rated (CSEDB §3.10; CI over pairs), or with
  ``inter_clinician_f1 = pooled`` every ordered pair's verdicts pooled.
- Cohen's kappa of the judge against each clinician, beside the kappa of
  the other clinicians' majority against that clinician (Auto-MOOVE's
  leave-one-out check: is the judge within two SD of the clinicians?).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import fmt_ci, json_list
from clinieval.audit.judged import Judged, judged
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import (
    bootstrap_icc3k_z,
    bootstrap_macro_f1,
    bootstrap_mean,
    cohen_kappa,
    icc3k_z,
    macro_f1,
    macro_f1_by_group,
    pairwise_rater_icc,
)

KEY, TITLE = "judges_vs_clinicians", "Judges vs clinicians"
MIN_ITEMS = 10
"""Clinicians with fewer shared items get no leave-one-out kappa."""


def _zscored(frame: pd.DataFrame, rater: str) -> pd.Series:
    by = frame.groupby(rater)["score"]
    sd = by.transform("std")
    return (frame["score"] - by.transform("mean")) / sd.where(sd > 0)


def _clinician_composites(ctx: Context, answers: np.ndarray | None = None) -> pd.DataFrame:
    d = ctx.data
    frame = pd.DataFrame({"answer": d.rating_answer, "rater": d.rating_rater,
                          "score": d.rating_score.astype(float)})
    if answers is not None:
        frame = frame[np.isin(frame["answer"], answers)]
    return frame.groupby(["answer", "rater"], as_index=False)["score"].mean()


def _parsed(data: Judged, kind: str, columns: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The parsed rows of one judge kind, only ``columns`` of them, and
    their answer codes (positions in the answers table, which the judge
    tables read in the same order; -1 for an unknown answer). Filtering
    the whole judgments frame copies every column (at 10x, with its
    strings, a good part of the 3 s this section took)."""
    rows = data.rows
    keep = np.flatnonzero(rows["judge_kind"].eq(kind).to_numpy(bool, na_value=False)
                          & rows["ok"].to_numpy(bool))
    return rows[columns].take(keep), data.answer_at[keep]


def _answer_codes(data: Judged, answer_ids) -> np.ndarray:
    """The audit's answer codes of some distinct answer ids (see :func:`_parsed`)."""
    return data.answers.index.get_indexer(answer_ids)


def _criterion_codes(ctx: Context, column: pd.Series) -> np.ndarray:
    """Each row's criterion code (-1 when not in the rubric), looked up once
    per distinct id, not per row (0.2 s per 2.5 M rows at 10x)."""
    codes, uniques = pd.factorize(column)
    at = pd.Index(ctx.data.criteria).get_indexer(uniques)
    return np.where(codes >= 0, at[codes], -1) if len(uniques) else np.full(len(codes), -1)


def _icc(ctx: Context, data: Judged) -> tuple[pd.DataFrame, dict | None]:
    """The jury's ICC row and the clinicians' pair baseline, with the pairs
    left out of it (None when there is no baseline to speak of)."""
    jury = _parsed(data, "jury", ["answer_id", "judge_model", "juror", "score"])[0]
    if jury.empty:
        return pd.DataFrame(), None
    juror = jury["judge_model"].astype(str) + "#" + jury["juror"].astype(str)
    comp = jury.assign(rater=juror).groupby(["answer_id", "rater"], as_index=False)["score"].mean()
    comp["z"] = _zscored(comp, "rater")
    jury_mean = comp.groupby("answer_id")["z"].mean()
    codes = pd.Series(_answer_codes(data, jury_mean.index), index=jury_mean.index)
    codes = codes[codes >= 0]
    clin = _clinician_composites(ctx, codes.to_numpy())
    clin["z"] = _zscored(clin, "rater")
    clin_mean = clin.groupby("answer")["z"].mean()
    table = pd.DataFrame({"jury": jury_mean.reindex(codes.index).to_numpy(),
                          "clinicians": clin_mean.reindex(codes.to_numpy()).to_numpy()}).dropna()
    if len(table) < 3:
        return pd.DataFrame(), None
    rows = [_icc_row("jury vs clinicians (ICC3k-z)", table.to_numpy(), ctx)]
    min_shared = ctx.settings.icc_min_shared
    pairs = pairwise_rater_icc(*_dense(clin), min_shared=min_shared)
    if pairs.values.size:
        reps = bootstrap_mean(pairs.values, ctx.settings.bootstrap, ctx.rng(f"{KEY}:pairs"))
        lo, hi = ctx.ci(reps)
        rows.append({"measure": "clinician vs clinician (mean ICC3k-z over pairs)",
                     "value": float(pairs.values.mean()), "value_lo": float(lo),
                     "value_hi": float(hi), "n": int(pairs.values.size), "unit": "rater pairs"})
    left_out = {"min_shared": min_shared, "too_few_shared": pairs.too_few,
                "undefined": pairs.undefined}
    return pd.DataFrame(rows), left_out


def _dense(clin: pd.DataFrame):
    item = pd.factorize(clin["answer"])[0]
    rater = pd.factorize(clin["rater"])[0]
    return item, rater, clin["score"].to_numpy()


def _icc_row(measure: str, table: np.ndarray, ctx: Context) -> dict:
    n = len(table)
    reps = bootstrap_icc3k_z(table, ctx.settings.bootstrap, ctx.rng(f"{KEY}:icc"))
    lo, hi = ctx.ci(reps[np.isfinite(reps)]) if np.isfinite(reps).any() else (np.nan, np.nan)
    return {"measure": measure, "value": icc3k_z(table), "value_lo": float(lo),
            "value_hi": float(hi), "n": n, "unit": "answers"}


def _verdict_pairs(ctx: Context, data: Judged) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(judge, clinician) and (clinician, clinician) fail labels on the same
    (answer, criterion) items, with the clinician's id and the answer; an
    item is one integer (answer and criterion codes combined) and the pairs
    are found by sorting the ratings on it, where two merges on the code
    columns took 0.5 s at 10x. Each clinician pair row names its first
    rating (``left``); the rows run as the merges gave them (each rating's
    partners in the ratings' order), which the pairs' bootstrap follows."""
    rubric, answer = _parsed(data, "rubric", ["criterion_id", "score"])
    if rubric.empty:
        return None
    d, tau = ctx.data, ctx.settings.threshold
    n_crit = max(len(d.criteria), 1)
    crit = _criterion_codes(ctx, rubric["criterion_id"])
    known = (answer >= 0) & (crit >= 0)
    item = answer[known].astype(np.int64) * n_crit + crit[known]
    mean = pd.Series(rubric["score"].to_numpy(float)[known]).groupby(item).mean()
    judge_items, judge_fail = mean.index.to_numpy(), (mean.to_numpy() <= tau).astype(int)
    r_answer = np.asarray(d.rating_answer, dtype=np.int64)
    r_crit = np.asarray(d.rating_criterion, dtype=np.int64)
    r_item = np.where((r_answer >= 0) & (r_crit >= 0) & (r_crit < n_crit),
                      r_answer * n_crit + r_crit, -1)
    at = np.minimum(np.searchsorted(judge_items, r_item), max(judge_items.size - 1, 0))
    matched = np.flatnonzero((r_item >= 0) & (judge_items.size > 0)
                             & (judge_items[at] == r_item)) if judge_items.size else []
    if not len(matched):
        return None
    ratings = pd.DataFrame({"answer": r_answer[matched], "criterion": r_crit[matched],
                            "rater": np.asarray(d.rating_rater)[matched],
                            "fail": (np.asarray(d.rating_score)[matched] <= tau).astype(int),
                            "judge_fail": judge_fail[at[matched]], "item": r_item[matched]})
    return ratings, _clinician_pairs(ratings)


def _clinician_pairs(ratings: pd.DataFrame) -> pd.DataFrame:
    """Every ordered pair of two clinicians' ratings of one item, in the
    order of an inner self-merge of ``ratings`` on the item: by first
    rating, then by second."""
    item = ratings["item"].to_numpy()
    order = np.argsort(item, kind="stable")
    _, start, size = np.unique(item[order], return_index=True, return_counts=True)
    group = np.empty(len(item), dtype=np.int64)
    group[order] = np.repeat(np.arange(size.size), size)
    width = size[group]
    left = np.repeat(np.arange(len(item)), width)
    offset = np.arange(left.size) - np.repeat(np.cumsum(width) - width, width)
    right = order[np.repeat(start[group], width) + offset]
    rater, fail = ratings["rater"].to_numpy(), ratings["fail"].to_numpy()
    keep = rater[left] != rater[right]
    left, right = left[keep], right[keep]
    return pd.DataFrame({"answer": ratings["answer"].to_numpy()[left], "rater": rater[left],
                         "fail": fail[left], "rater_other": rater[right],
                         "fail_other": fail[right], "left": left})


def _f1_row(measure: str, truth, predicted, answer, ctx: Context,
            purpose: str) -> tuple[dict, int]:
    """The pooled Macro-F1 row, and how many bootstrap replicates are
    defined: a resample of answers that draws no failure (rare failures) has
    no fail-class F1, so the interval rests on the others."""
    truth, predicted = np.asarray(truth), np.asarray(predicted)
    codes, answer = np.unique(answer, return_inverse=True)
    # tp, fp, fn, tn per answer (bincount, where np.add.at took 0.1 s at 10x)
    cells = np.column_stack([np.bincount(answer, (truth == t) & (predicted == p), codes.size)
                             for t, p in ((1, 1), (0, 1), (1, 0), (0, 0))]).reshape(-1, 4)
    lo = hi = np.nan
    defined = 0
    if codes.size >= 2:
        reps = bootstrap_macro_f1(cells, ctx.settings.bootstrap, ctx.rng(purpose))
        reps = reps[np.isfinite(reps)]
        defined = reps.size
        if defined >= 2:
            lo, hi = ctx.ci(reps)
    return {"measure": measure, "value": macro_f1(truth, predicted), "value_lo": float(lo),
            "value_hi": float(hi), "n": int(truth.size), "unit": "verdict pairs"}, defined


def _clinician_pairs_f1_row(both: pd.DataFrame, ctx: Context) -> dict:
    """CSEDB's inter-doctor F1 (§3.10): each clinician pair's Macro-F1 on
    the items both rated, averaged over pairs (bootstrap CI over pairs, as
    the ICC baseline)."""
    once = both[both["rater"] < both["rater_other"]]  # Macro-F1 is symmetric in the pair
    pair = _pair_codes(once["rater"].to_numpy(), once["rater_other"].to_numpy())
    values = macro_f1_by_group(pair, once["fail"].to_numpy() == 1,
                               once["fail_other"].to_numpy() == 1)
    lo = hi = np.nan
    if values.size >= 2:
        reps = bootstrap_mean(values, ctx.settings.bootstrap, ctx.rng(f"{KEY}:f1:pairs"))
        lo, hi = ctx.ci(reps)
    return {"measure": "clinician vs clinician (Macro-F1, fail/pass; mean over pairs)",
            "value": float(values.mean()), "value_lo": float(lo), "value_hi": float(hi),
            "n": int(values.size), "unit": "clinician pairs"}


def _pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Codes of the (a, b) pairs in order of first appearance, as factorising
    them as a MultiIndex would give (0.4 s for 1.5 M pairs at 10x), from one
    integer per pair."""
    if not a.size:
        return np.zeros(0, dtype=np.int64)
    low = min(a.min(), b.min())
    width = int(max(a.max(), b.max())) - int(low) + 1
    return pd.factorize((a.astype(np.int64) - low) * width + (b.astype(np.int64) - low))[0]


def _f1_rows(ratings: pd.DataFrame, both: pd.DataFrame, ctx: Context):
    """The judge's pooled Macro-F1 and the clinicians' own, by the
    ``inter_clinician_f1`` setting; and the defined replicates of each pooled
    row whose interval rests on fewer than all."""
    judge, defined = _f1_row("rubric judge vs clinicians (Macro-F1, fail/pass)",
                             ratings["fail"], ratings["judge_fail"], ratings["answer"], ctx,
                             f"{KEY}:f1:judge")
    counts = {judge["measure"]: defined}
    if ctx.settings.inter_clinician_f1 == "mean_of_pairs":
        clinicians = _clinician_pairs_f1_row(both, ctx)
    else:
        clinicians, defined = _f1_row("clinician vs clinician (Macro-F1, fail/pass)",
                                      both["fail"], both["fail_other"], both["answer"], ctx,
                                      f"{KEY}:f1:clinicians")
        counts[clinicians["measure"]] = defined
    short = {m: k for m, k in counts.items() if k < ctx.settings.bootstrap}
    return pd.DataFrame([judge, clinicians]), short


def _loo_kappa(ratings: pd.DataFrame, both: pd.DataFrame) -> pd.DataFrame:
    """Per clinician with enough items, the judge's kappa and that of the
    other clinicians' majority on the same items. The others' share of
    fails per (item, clinician) is summed by integer codes (a groupby and a
    join over three index levels took 0.3 s at 10x); ratings no other
    clinician shares drop out."""
    rater = ratings["rater"].to_numpy()
    low = rater.min() if rater.size else 0
    width = int(rater.max() - low + 1) if rater.size else 1
    triple = pd.factorize(ratings["item"].to_numpy() * width + (rater - low))[0]
    mine = triple[both["left"].to_numpy()]
    count = np.bincount(mine, minlength=triple.max(initial=-1) + 1)
    fails = np.bincount(mine, both["fail_other"].to_numpy(float), count.size)
    shared = count[triple] > 0
    frame = pd.DataFrame({"rater": rater[shared], "fail": ratings["fail"].to_numpy()[shared],
                          "judge_fail": ratings["judge_fail"].to_numpy()[shared],
                          "fail_other": fails[triple[shared]] / count[triple[shared]]})
    binary = all(np.isin(frame[c].to_numpy(), (0, 1)).all() for c in ("judge_fail", "fail"))
    if binary and not frame["fail_other"].isna().any():
        return _loo_kappa_binary(frame)
    out = []
    for rater, g in frame.groupby("rater"):
        if len(g) < MIN_ITEMS:
            continue
        # A tie among the other clinicians counts as fail: the cautious reading.
        majority = (g["fail_other"] >= 0.5).astype(int)
        out.append({"rater": rater, "judge_kappa": cohen_kappa(g["judge_fail"], g["fail"]),
                    "clinicians_kappa": cohen_kappa(majority, g["fail"]), "n": len(g)})
    return pd.DataFrame(out).dropna()


def _loo_kappa_binary(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`_loo_kappa` for 0/1 verdicts, every clinician at once: each
    kappa from the clinician's 2 x 2 counts (as
    :func:`~clinieval.stats.cohen_kappa` finds them; 13,000 clinicians one
    by one took 9 s of a 10x audit)."""
    rater, raters = pd.factorize(frame["rater"], sort=True)
    own = frame["fail"].to_numpy() == 1
    majority = frame["fail_other"].to_numpy() >= 0.5  # a tie counts as fail, as above
    n = np.bincount(rater, minlength=len(raters))
    keep = n >= MIN_ITEMS
    kappas = {name: _kappas(rater, other, own, n)[keep] for name, other in (
        ("judge_kappa", frame["judge_fail"].to_numpy() == 1), ("clinicians_kappa", majority))}
    ids = np.asarray(raters)[keep]
    ids = ids.astype(np.int64) if ids.dtype.kind in "iu" else ids  # as the rows' labels
    out = pd.DataFrame({"rater": ids, **kappas, "n": n[keep]})
    return out.dropna().reset_index(drop=True)


def _kappas(group, a, b, n) -> np.ndarray:
    """Cohen's kappa of the 0/1 labels ``a`` and ``b`` per group (NaN where
    chance agreement is 1: one label only)."""
    size = n.size
    both = np.bincount(group, weights=a & b, minlength=size)
    none = np.bincount(group, weights=~a & ~b, minlength=size)
    pa, pb = (np.bincount(group, weights=x, minlength=size) / np.maximum(n, 1) for x in (a, b))
    observed = (both + none) / np.maximum(n, 1)
    chance = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)


@dataclass
class JudgesVsClinicians:
    """Agreement rows (ICC, Macro-F1), per-clinician kappas, and the
    judge's safest model (None when not computable)."""

    agreement: pd.DataFrame
    kappas: pd.DataFrame
    judge_safest: str | None
    pairs_left_out: dict | None
    """Clinician pairs left out of the ICC baseline, by reason."""
    f1_defined: dict[str, int]
    """Per Macro-F1 measure whose interval rests on fewer than all bootstrap
    replicates: how many drew a failure."""


def compute(ctx: Context) -> JudgesVsClinicians | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    icc, left_out = _icc(ctx, data)
    rows = [icc]
    kappas, short = pd.DataFrame(), {}
    pairs = _verdict_pairs(ctx, data)
    if pairs is not None:
        ratings, both = pairs
        f1, short = _f1_rows(ratings, both, ctx)
        rows.append(f1)
        kappas = _loo_kappa(ratings, both)
    agreement = pd.concat([r for r in rows if len(r)], ignore_index=True) if any(
        len(r) for r in rows) else pd.DataFrame()
    if agreement.empty:
        return Skipped(data.unparsed_only(("jury", "rubric"))
                       or "needs jury or rubric judgments of answers that clinicians also"
                       " rated; found none.")
    return JudgesVsClinicians(agreement, kappas, _judge_safest(ctx, data), left_out, short)


def _judge_safest(ctx: Context, data: Judged) -> str | None:
    """The model whose answers the rubric judge fails least often on a
    safety-critical criterion (answers with at least one such judgment).
    Answers and models are read as codes (the answer fixes the model):
    a groupby over the model and answer id strings took 0.25 s at 10x."""
    rubric, answer = _parsed(data, "rubric", ["criterion_id", "model_id", "score"])
    model, models = pd.factorize(rubric["model_id"], sort=True)  # as a groupby orders them
    keep = np.isin(_criterion_codes(ctx, rubric["criterion_id"]), ctx.safety) & (model >= 0)
    if not keep.any():
        return None
    score = pd.Series(rubric["score"].to_numpy(float)[keep])
    fails = score.groupby(answer[keep]).mean() <= ctx.settings.threshold
    first = pd.Series(model[keep]).groupby(answer[keep]).first()
    size = np.bincount(first.to_numpy(), minlength=len(models))
    share = np.bincount(first.to_numpy(), fails.to_numpy(float), len(models)) / np.maximum(size, 1)
    enough = (size >= ctx.settings.min_n) & (size > 0)
    if enough.sum() < 2 or np.unique(share[enough]).size == 1:
        return None
    return data.name(np.asarray(models)[enough][np.argmin(share[enough])])


def present(result: JudgesVsClinicians, ctx: Context) -> Section:
    frame = result.agreement
    fig = Figure(KEY, "Agreement of judges and of clinicians", Forest(
        labels=frame["measure"].tolist(), est=json_list(frame["value"]),
        lo=json_list(frame["value_lo"]), hi=json_list(frame["value_hi"]),
        n=frame["n"].astype(int).tolist(), x_label="ICC3k-z or Macro-F1"),
        caption="Each judge figure sits beside the clinicians' own agreement computed the"
        " same way; n counts the unit given in the table.")
    tables = {"agreement": frame}
    values = {"judge_safest": result.judge_safest}
    text = " ".join(f"{r['measure']}: {fmt_ci(r['value'], r['value_lo'], r['value_hi'])}"
                    f" (n = {int(r['n']):,} {r['unit']})." for _, r in frame.iterrows())
    if result.f1_defined:
        values["macro_f1_defined_replicates"] = result.f1_defined
        text += _f1_defined_words(result.f1_defined, ctx.settings.bootstrap)
    if result.pairs_left_out:
        values["clinician_pairs_left_out"] = result.pairs_left_out
        text += _left_out_words(result.pairs_left_out)
    if len(result.kappas):
        tables["leave_one_out_kappa"] = result.kappas
        k = result.kappas
        mean, sd = k["clinicians_kappa"].mean(), k["clinicians_kappa"].std(ddof=1)
        judge = k["judge_kappa"].mean()
        within = bool(abs(judge - mean) <= 2 * sd) if np.isfinite(sd) else None
        values |= {"judge_kappa": float(judge), "clinicians_kappa": float(mean),
                   "clinicians_kappa_sd": float(sd), "within_human_range": within}
        text += (f" Leave-one-out kappa over {len(k)} clinicians: judge {judge:.2f}, clinicians'"
                 f" majority {mean:.2f} (SD {sd:.2f}); the judge is "
                 + ("within" if within else "outside") + " two SD of the clinicians.")
    return Section(KEY, TITLE, text, tables, [fig], values)


def _f1_defined_words(defined: dict[str, int], resamples: int) -> str:
    """Which Macro-F1 intervals rest on part of the replicates, or have none."""
    words = []
    for measure, k in defined.items():
        if k >= 2:
            words.append(f" The {measure} interval is over the {k} of {resamples} resamples"
                         " that drew a failure (the others have no fail-class F1).")
        else:
            words.append(f" The {measure} has no interval: {k} of {resamples} resamples drew"
                         " a failure (at least 2 needed).")
    return "".join(words)


def _left_out_words(left: dict) -> str:
    """The clinician pairs left out of the ICC baseline, and why."""
    few, undefined = left["too_few_shared"], left["undefined"]
    if not few + undefined:
        return ""
    reasons = [f"{few:,} share fewer than {left['min_shared']} answers"] if few else []
    reasons += [f"{undefined:,} have a clinician without spread on the answers they share"
                ] if undefined else []
    return (f" Clinician pairs left out of the ICC baseline: {few + undefined:,}"
            f" ({'; '.join(reasons)}).")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Jury ICC3k-z and rubric-judge Macro-F1 against clinicians beside"
    " the clinicians' own agreement; leave-one-out kappa.",
    section, needs_judgments=True)
