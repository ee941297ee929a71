"""Gate scores and Worst@k from rule judgments (CSEDB).

A case belongs to the gate indicator its ``subcategory`` names. An answer's
score on its case: binary indicators score 1 when every rule is met, graded
ones earned over total rule points; repeats of the judge are averaged, then
an answer's samples, to one score per model and case. Gate scores are means
weighted by case weight (the indicator's weight when the case has none),
overall and by department, population and risk band; models are compared on
their shared cases by a paired bootstrap with Holm's correction. Worst@k is
exact (order statistics), not sampled. An answer with an unparsed rule has no
score: it is counted, never scored as met or unmet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import fmt_ci, json_list
from clinieval.audit.judged import Judged, judged, risk_band
from clinieval.audit.result import Figure, Forest, Line, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.catalogs import GATES, load_indicators
from clinieval.stats import bootstrap_case_means, gate_case_scores, paired_comparisons, worst_at_k

KEY, TITLE = "gates", "Gates and Worst@k"
STRATA = ("department", "population", "risk")


@dataclass
class GateScores:
    """One row per (model, case) with its averaged score, gate, weight and
    strata; per-answer sample scores for Worst@k; what could not be scored."""

    cases: pd.DataFrame
    samples: pd.DataFrame
    unscored_answers: int
    unmatched_cases: int


def case_scores(data: Judged, indicators_path: str | None) -> GateScores | Skipped:
    rules = data.kind("rule")
    if rules.empty:
        return Skipped("needs rule judgments (judge kind 'rule'); found none.")
    indicators = load_indicators(indicators_path).by_id()
    indicator = data.cases["subcategory"].reindex(rules["case_id"]).to_numpy()
    known = np.isin(indicator, list(indicators))
    unmatched = int(pd.unique(rules["case_id"][~known]).size)
    rules = rules[known].assign(indicator=indicator[known])
    if rules.empty:
        return Skipped("no judged case names a gate indicator in its subcategory"
                       f" ({unmatched} judged cases do not).")
    runs = _run_scores(rules, indicators)
    samples = runs.groupby(["answer_id", "model_id", "case_id", "sample_index"],
                           as_index=False)["score"].mean()
    unscored = int(samples["score"].isna().sum())
    samples = samples.dropna(subset=["score"])
    if samples.empty:
        return Skipped(f"every judged gate answer ({unscored}) has an unparsed rule, so none"
                       " can be scored (a judge outage?).")
    cases = samples.groupby(["model_id", "case_id"], as_index=False).agg(
        score=("score", "mean"), samples=("score", "size"))
    return GateScores(_with_strata(cases, data, indicators), samples, unscored, unmatched)


def _run_scores(rules: pd.DataFrame, indicators: dict) -> pd.DataFrame:
    """Score of each judge run (answer, juror, repeat); NaN when any of its
    rules did not parse."""
    keys = ["answer_id", "juror", "repeat"]
    run_code, runs = pd.factorize(pd.MultiIndex.from_frame(rules[keys]))
    positive = rules["points"].fillna(1.0).clip(lower=0).to_numpy()
    graded = np.zeros(len(runs), dtype=bool)
    graded[run_code] = [indicators[i].scoring == "graded" for i in rules["indicator"]]
    scores = gate_case_scores(positive, rules["score"].to_numpy() == 1.0, run_code, graded)
    broken = np.bincount(run_code, weights=~rules["ok"].to_numpy(), minlength=len(runs)) > 0
    first = rules.groupby(run_code).first()
    return pd.DataFrame({"answer_id": first["answer_id"], "model_id": first["model_id"],
                         "case_id": first["case_id"], "sample_index": first["sample_index"],
                         "score": np.where(broken, np.nan, scores)})


def _with_strata(cases: pd.DataFrame, data: Judged, indicators: dict) -> pd.DataFrame:
    info = data.cases.reindex(cases["case_id"])
    indicator = [indicators[i] for i in info["subcategory"]]
    weight = info["weight"].to_numpy(float)
    cases["gate"] = [i.gate for i in indicator]
    cases["weight"] = np.where(np.isnan(weight), [i.weight for i in indicator], weight)
    risk = info["risk_level"].astype(float)
    risk = risk.where(risk.notna(), pd.Series([i.weight for i in indicator], index=risk.index))
    cases["risk"] = risk_band(risk).to_numpy()
    cases["department"] = info["department"].fillna("unknown").to_numpy()
    cases["population"] = info["population"].to_numpy()
    return cases


@dataclass
class Gates:
    """Every table of the section, ready to present."""

    scores: GateScores
    overall: pd.DataFrame
    strata: pd.DataFrame
    worst: pd.DataFrame
    comparisons: pd.DataFrame


def _weighted(frame: pd.DataFrame, ctx: Context, purpose: str) -> tuple[float, float, float]:
    w, s = frame["weight"].to_numpy(float), frame["score"].to_numpy(float)
    value = float(w @ s / w.sum())
    if len(frame) < 2:
        return value, np.nan, np.nan
    reps = bootstrap_case_means(s[:, None], ctx.settings.bootstrap, ctx.rng(purpose), w)[:, 0]
    lo, hi = ctx.ci(reps)
    return value, float(lo), float(hi)


def _table(cases: pd.DataFrame, by: list[str], ctx: Context, data: Judged) -> pd.DataFrame:
    out = []
    for key, group in cases.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        value, lo, hi = _weighted(group, ctx, f"{KEY}:{'/'.join(map(str, key))}")
        out.append(dict(zip(by, key, strict=True)) | {
            "score": value, "score_lo": lo, "score_hi": hi, "n": len(group),
            "weight_sum": float(group["weight"].sum())})
    frame = pd.DataFrame(out)
    frame.insert(0, "model", [data.name(m) for m in frame["model_id"]])
    return frame.drop(columns="model_id")


def _strata(cases: pd.DataFrame, ctx: Context, data: Judged) -> pd.DataFrame:
    frames = []
    for stratum in STRATA:
        table = _table(cases, ["model_id", "gate", stratum], ctx, data)
        frames.append(table.rename(columns={stratum: "value"}).assign(stratum=stratum))
    return pd.concat(frames, ignore_index=True)[
        ["model", "gate", "stratum", "value", "score", "score_lo", "score_hi", "n",
         "weight_sum"]]


def _worst(samples: pd.DataFrame, ctx: Context, data: Judged) -> pd.DataFrame:
    """Worst@k for k = 1..n per model, n its most common number of scored
    samples per case; cases with fewer are left out (an unparsed sample must
    not shorten every case's curve), those with more use their first n."""
    out = []
    for model, group in samples.groupby("model_id", sort=True):
        per_case = group.sort_values("sample_index").groupby("case_id")["score"].apply(list)
        counts = per_case.map(len)
        n = int(counts[counts >= 2].mode().max()) if (counts >= 2).any() else 0
        per_case = per_case[counts >= n]
        if n < 2:
            continue
        curves = worst_at_k(np.array([s[:n] for s in per_case]))
        reps = bootstrap_case_means(curves, ctx.settings.bootstrap, ctx.rng(f"{KEY}:worst:{model}"))
        lo, hi = ctx.ci(reps)
        for k in range(n):
            out.append({"model": data.name(model), "k": k + 1, "worst_at_k": curves[:, k].mean(),
                        "worst_at_k_lo": lo[k], "worst_at_k_hi": hi[k], "n": len(per_case),
                        "samples": n})
    return pd.DataFrame(out)


def _comparisons(cases: pd.DataFrame, ctx: Context, data: Judged) -> pd.DataFrame:
    out = []
    for gate in GATES:
        wide = cases[cases["gate"] == gate].pivot(index="case_id", columns="model_id",
                                                   values="score").dropna()
        if wide.shape[1] < 2 or wide.shape[0] < 2:
            continue
        weight = cases.drop_duplicates("case_id").set_index("case_id")["weight"]
        found = paired_comparisons(wide.to_numpy(), ctx.settings.comparison_bootstrap,
                                   ctx.rng(f"{KEY}:paired:{gate}"),
                                   weights=weight.reindex(wide.index).to_numpy(),
                                   level=ctx.settings.level)
        names = [data.name(m) for m in wide.columns]
        out += [{"gate": gate, "first": names[c.first], "second": names[c.second],
                 "difference": c.difference, "difference_lo": c.lower,
                 "difference_hi": c.upper, "p_value": c.p_value, "p_holm": c.p_holm,
                 "n": wide.shape[0]} for c in found]
    return pd.DataFrame(out)


def compute(ctx: Context) -> Gates | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    scores = case_scores(data, ctx.settings.indicators)
    if isinstance(scores, Skipped):
        return scores
    cases = scores.cases
    return Gates(scores, _table(cases, ["model_id", "gate"], ctx, data),
                 _strata(cases, ctx, data), _worst(scores.samples, ctx, data),
                 _comparisons(cases, ctx, data))


def present(result: Gates, ctx: Context) -> Section:
    figures = [_forest(result.overall, gate) for gate in GATES
               if (result.overall["gate"] == gate).any()]
    for model, curve in result.worst.groupby("model", sort=False) if len(result.worst) else []:
        figures.append(Figure(f"{KEY}_worst_{len(figures)}", f"Worst@k: {model}", Line(
            x=curve["k"].astype(float).tolist(), y=json_list(curve["worst_at_k"]),
            lo=json_list(curve["worst_at_k_lo"]), hi=json_list(curve["worst_at_k_hi"]),
            x_label="k (answers drawn of the case's samples)", y_label="expected minimum score"),
            caption=f"Exact expected minimum over k of {int(curve['samples'].iloc[0])} samples;"
            f" n = {int(curve['n'].iloc[0])} cases; bootstrap CI over cases."))
    tables = {"gates": result.overall, "strata": result.strata, "worst_at_k": result.worst,
              "comparisons": result.comparisons}
    return Section(KEY, TITLE, _summary(result), tables, figures, _values(result))


def _forest(overall: pd.DataFrame, gate: str) -> Figure:
    rows = overall[overall["gate"] == gate].sort_values("score", ascending=False)
    return Figure(f"{KEY}_{gate}", f"{gate.capitalize()} gate score per model", Forest(
        labels=rows["model"].tolist(), est=json_list(rows["score"]),
        lo=json_list(rows["score_lo"]), hi=json_list(rows["score_hi"]),
        n=rows["n"].astype(int).tolist(), x_label="weighted gate score (0-1)"),
        caption="Mean of case scores weighted by case weight; n counts cases; bootstrap CI"
        " over cases.")


def _values(result: Gates) -> dict:
    worst = {m: json_list(g["worst_at_k"]) for m, g in result.worst.groupby("model")
             } if len(result.worst) else {}
    return {"safest": _best(result.overall, "safety"), "worst_at_k": worst,
            "unscored_answers": result.scores.unscored_answers,
            "unmatched_cases": result.scores.unmatched_cases}


def _best(overall: pd.DataFrame, gate: str) -> str | None:
    rows = overall[overall["gate"] == gate]
    if len(rows) < 2 or rows["score"].nunique() == 1:
        return None
    return str(rows.loc[rows["score"].idxmax(), "model"])


def _summary(result: Gates) -> str:
    parts = []
    for gate in GATES:
        rows = result.overall[result.overall["gate"] == gate]
        if len(rows):
            top = rows.loc[rows["score"].idxmax()]
            parts.append(f"best {gate} gate score: {top['model']}"
                         f" {fmt_ci(top['score'], top['score_lo'], top['score_hi'])}"
                         f" (n = {int(top['n'])} cases)")
    text = "; ".join(parts) + "." if parts else ""
    text = text[:1].upper() + text[1:]
    if len(result.worst):
        drop = result.worst.groupby("model").apply(
            lambda g: g["worst_at_k"].iloc[0] - g["worst_at_k"].iloc[-1], include_groups=False)
        model = drop.idxmax()
        curve = result.worst[result.worst["model"] == model]
        text += (f" Largest Worst@k collapse: {model}, from {curve['worst_at_k'].iloc[0]:.2f}"
                 f" at k = 1 to {curve['worst_at_k'].iloc[-1]:.2f} at k ="
                 f" {int(curve['k'].iloc[-1])} (n = {int(curve['n'].iloc[0])} cases).")
    if result.scores.unscored_answers:
        text += (f" {result.scores.unscored_answers} judged answers have an unparsed rule and"
                 " are left unscored.")
    return text.strip()


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "CSEDB gate scores weighted by case weight, by department, population and risk,"
    " exact Worst@k curves and paired bootstrap comparisons with Holm.",
    section, needs_judgments=True)
