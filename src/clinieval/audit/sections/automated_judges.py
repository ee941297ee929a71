"""What the automated judges did and how far to trust them on their own:
calls by kind and parse status, cost, position and length preference of the
pairwise judge, and run-to-run variance from repeats.

Unparsed and failed calls are counted in every table and never given a
score. Rates carry Wilson intervals; pooled SDs a bootstrap interval over
the repeated units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, json_list, row_pct, wilson_pct
from clinieval.audit.judged import Judged, answer_id_codes, combine_codes, judged, text_codes
from clinieval.audit.result import Bars, Figure, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section, viewer_href
from clinieval.contract import vocabulary
from clinieval.providers.failure import UNPARSED, cause_of
from clinieval.stats import (
    A_WINS,
    B_WINS,
    binomial_p_value,
    bootstrap_pooled_sd,
    group_mean_ci,
    repeat_spread,
)

KEY, TITLE = "automated_judges", "Automated judges"
OK = vocabulary.PARSE_STATUSES[0]
FAILED_PREFIX = "call failed: "
"""How a failed call's judgments begin their reason (``runs.judges``)."""
_UNIT = ["judge_kind", "judge_model", "answer_id", "answer_b_id", "criterion_id", "juror",
         "shown_first"]
"""A judged unit whose repeats should agree."""


@dataclass
class JudgeReport:
    """The section's tables (empty frames where the data has no such rows)."""

    calls: pd.DataFrame
    cost: pd.DataFrame
    answering: pd.DataFrame
    latency: pd.DataFrame
    endpoints: pd.DataFrame
    failures: pd.DataFrame
    position: pd.DataFrame
    length: pd.DataFrame
    repeats: pd.DataFrame


def _calls(calls: pd.DataFrame, rows: pd.DataFrame, level: float) -> pd.DataFrame:
    """Calls per judge kind and judge by parse status, with the share not
    parsed over calls: a call that scores nine criteria is one call, so its
    nine rows do not narrow the interval."""
    unit = ["judge_kind", "judge_model"]
    counts = calls.pivot_table(index=unit, columns="parse_status", values="call",
                               aggfunc="size", fill_value=0)
    counts = counts.reindex(columns=list(vocabulary.PARSE_STATUSES), fill_value=0).reset_index()
    counts.columns.name = None
    n = counts[list(vocabulary.PARSE_STATUSES)].sum(axis=1)
    counts["n"] = n
    counts["rows"] = rows.groupby(unit).size().reindex(
        pd.MultiIndex.from_frame(counts[unit])).to_numpy()
    return wilson_pct(counts, "not_parsed_pct", n - counts[OK], n, level)


def _cost(data: Judged, level: float) -> pd.DataFrame:
    """Per judge: what its answers would cost at list price (cache hits
    included, from the judgments), what the runs spent (calls that reached
    the endpoint, from the run records), and tokens per call."""
    calls = data.calls
    groups, keys = pd.factorize(pd.MultiIndex.from_frame(calls[["judge_kind", "judge_model"]]))
    cost = calls["cost_usd"].to_numpy(float)
    known = ~np.isnan(cost)
    k, mean, lo, hi = group_mean_ci(groups[known], cost[known], len(keys), level)
    frame = pd.DataFrame(list(keys), columns=["judge_kind", "judge_model"])
    frame["list_price_usd"] = np.bincount(groups[known], cost[known], len(keys))
    frame["spent_usd"] = _spent(data.run_records, frame["judge_kind"], frame["judge_model"])
    frame = estimate(frame, "list_usd_per_call", mean, lo, hi)
    for side in ("input", "output"):
        tokens = calls[f"{side}_tokens"].fillna(0).to_numpy(float)
        frame[f"{side}_tokens_per_call"] = np.bincount(groups, tokens, len(keys)) / np.maximum(
            np.bincount(groups, minlength=len(keys)), 1)
    frame["n"] = np.bincount(groups, minlength=len(keys))
    frame["n_priced"] = k
    return frame


def _spent(runs: pd.DataFrame | None, kinds, models) -> np.ndarray:
    """USD the runs of each (run kind, model) paid for, from the run records:
    every attempt that reached an endpoint, calls repeated after a stop
    included (runs made before the call log count their fresh calls); cache
    hits add nothing. NaN without run records (a bundle or file)."""
    if runs is None:
        return np.full(len(kinds), np.nan)
    kind = runs["judge_kind"].fillna(runs["kind"])
    paid = runs.groupby([kind, runs["model_id"]])["cost_usd"].sum()
    return np.array([paid.get((k, m), 0.0) for k, m in zip(kinds, models, strict=True)])


def _answering(data: Judged, level: float) -> pd.DataFrame:
    answers = data.answers.dropna(subset=["cost_usd"])
    if answers.empty:
        return pd.DataFrame()
    groups, models = pd.factorize(answers["model_id"])
    cost = answers["cost_usd"].to_numpy(float)
    k, mean, lo, hi = group_mean_ci(groups, cost, len(models), level)
    frame = pd.DataFrame({"model": [data.name(m) for m in models],
                          "list_price_usd": np.bincount(groups, cost, len(models)),
                          "spent_usd": _spent(data.run_records, ["generate"] * len(models),
                                              models)})
    frame = estimate(frame, "list_usd_per_answer", mean, lo, hi)
    frame["n"] = k
    return frame


def _run_unit(run_calls: pd.DataFrame) -> list[pd.Series]:
    return [run_calls["judge_kind"].fillna(run_calls["kind"]).rename("run"),
            run_calls["model_id"].rename("model")]


def _latency(run_calls: pd.DataFrame | None, endpoint: bool = False) -> pd.DataFrame:
    """Median and 95th percentile of the seconds a task's fresh calls took,
    per run kind and model (with ``endpoint``: of the call log's answered
    attempts, per run kind, model and the endpoint that served them)."""
    if run_calls is None:
        return pd.DataFrame()
    timed = run_calls.dropna(subset=["latency_s"])
    if timed.empty:
        return pd.DataFrame()
    unit = _run_unit(timed) + ([timed["endpoint"]] if endpoint else [])
    grouped = timed.groupby(unit)["latency_s"]
    frame = grouped.quantile(0.5).rename("p50_s").to_frame()
    frame["p95_s"] = grouped.quantile(0.95)
    frame["n"] = grouped.size()
    return frame.reset_index()


def _failures(data: Judged, level: float) -> pd.DataFrame:
    """Failed and unparsed tasks by cause (read again from the stored error
    text) per run kind and model, over that model's tasks; from the judgments
    when the source holds no run records."""
    run_calls = data.run_calls
    if run_calls is None:
        run_calls = _judged_as_tasks(data.calls)
    run_calls = run_calls.assign(cause=_causes(run_calls["error"], run_calls["parse_status"]))
    tasks = run_calls.groupby(_run_unit(run_calls)).size()
    failed = run_calls.dropna(subset=["cause"])
    if failed.empty:
        return pd.DataFrame()
    frame = failed.groupby([*_run_unit(failed), failed["cause"]]).size().rename("k").reset_index()
    frame["n"] = tasks.reindex(pd.MultiIndex.from_frame(frame[["run", "model"]])).to_numpy()
    return wilson_pct(frame, "share_pct", frame["k"], frame["n"], level)


def _causes(error_text: pd.Series, parse_status: pd.Series) -> np.ndarray:
    """Each task's failure cause: read from its error text, else unparsed
    when its status says so, else None; found once per distinct (error,
    status) pair (per task it took 0.3 s at 10x)."""
    error, errors = pd.factorize(error_text)
    status, statuses = pd.factorize(parse_status)
    width = len(statuses) + 1  # codes + 1: a missing value's -1 becomes 0
    pair, pairs = pd.factorize((error.astype(np.int64) + 1) * width + status + 1)
    causes = []
    for code in pairs.tolist():
        e, p = code // width - 1, code % width - 1
        e = errors[e] if e >= 0 else None
        p = statuses[p] if p >= 0 else None
        causes.append(cause_of(e) if isinstance(e, str) else UNPARSED if p == "unparsed"
                      else None)
    return np.array(causes + [None], dtype=object)[pair]


def _judged_as_tasks(calls: pd.DataFrame) -> pd.DataFrame:
    """Judgment calls in the run records' shape: a failed call's judgments
    keep its error after the ``call failed:`` their reason starts with."""
    error = calls["reason"].where(calls["parse_status"] == "error")
    error = error.str.removeprefix(FAILED_PREFIX)
    return pd.DataFrame({"judge_kind": calls["judge_kind"], "kind": "judge",
                         "model_id": calls["judge_model"], "error": error,
                         "parse_status": calls["parse_status"]})


def _decided(data: Judged) -> pd.DataFrame:
    rows = data.kind("pairwise")
    return rows[rows["ok"] & rows["choice"].isin(vocabulary.SIDES)]


def _position(data: Judged, level: float) -> pd.DataFrame:
    decided = _decided(data)
    decided = decided[decided["shown_first"].isin(vocabulary.SIDES)]
    if decided.empty:
        return pd.DataFrame()
    first_won = int((decided["choice"] == decided["shown_first"]).sum())
    frame = wilson_pct(pd.DataFrame({"measure": ["first-shown answer wins"]}), "share_pct",
                       [first_won], [len(decided)], level)
    frame["n"] = len(decided)
    frame["p_value"] = binomial_p_value(first_won, len(decided))
    both = data.kind("pairwise").dropna(subset=["agreement"])
    both = both.drop_duplicates(["judge_model", "answer_id", "answer_b_id", "juror", "repeat"])
    consistent = wilson_pct(pd.DataFrame({"measure": ["same verdict in both orders"]}),
                            "share_pct", [int(both["agreement"].astype(bool).sum())],
                            [len(both)], level)
    consistent["n"] = len(both)
    consistent["p_value"] = np.nan
    return pd.concat([frame, consistent], ignore_index=True)


def _length(data: Judged, ctx: Context) -> pd.DataFrame:
    """Share of decided verdicts won by the longer answer: the judge's, beside
    the clinicians' votes (when lengths are known and differ)."""
    decided = _decided(data)
    decided = decided[decided["length"].notna() & decided["length_b"].notna()
                      & (decided["length"] != decided["length_b"])]
    judge_k = int(((decided["choice"] == "A") == (decided["length"] > decided["length_b"])).sum())
    d = ctx.data
    la, lb = d.answer_length[d.pref_a], d.answer_length[d.pref_b]
    votes = np.isin(d.pref_outcome, (A_WINS, B_WINS)) & np.isfinite(la) & np.isfinite(lb)
    votes &= la != lb
    clin_k = int(np.sum((d.pref_outcome[votes] == A_WINS) == (la[votes] > lb[votes])))
    frame = pd.DataFrame({"who": ["pairwise judge", "clinicians"]})
    n = [len(decided), int(votes.sum())]
    frame = wilson_pct(frame, "longer_wins_pct", [judge_k, clin_k], n, ctx.settings.level)
    frame["n"] = n
    return frame[frame["n"] > 0].reset_index(drop=True)


def _repeats(data: Judged, ctx: Context) -> pd.DataFrame:
    """Pooled within-unit SD of scores over repeats of the same judge on the
    same unit, per judge kind, with a bootstrap CI over units."""
    rows = data.rows
    # The parsed rows grouped as a groupby over the unit would group them,
    # with a missing second answer or order read as '' and any other missing
    # part leaving the row out; by codes per column (a groupby over the
    # tuples took 1.9 s at 10x, and filtering the whole frame copied it).
    whole = [c for c in _UNIT if c not in ("answer_b_id", "shown_first")]
    keep = np.flatnonzero(rows["ok"].to_numpy(bool) & rows[whole].notna().all(axis=1).to_numpy())
    unit, bound = np.zeros(keep.size, dtype=np.int64), 1
    for column in _UNIT:
        part = rows[column].iloc[keep]
        codes, n = (answer_id_codes(part, data.answer_at[keep]) if column == "answer_id"
                    else text_codes(part)[:2])
        unit, bound = combine_codes(unit, bound, codes, n)
    unit = pd.factorize(unit)[0].astype(np.int64)
    ok = rows[["judge_kind", "score"]].iloc[keep]
    variance, changed, _ = repeat_spread(unit, ok["score"].to_numpy(float))
    kinds = ok["judge_kind"].to_numpy()[np.unique(unit, return_index=True)[1]]
    kinds = kinds[np.bincount(unit) >= 2]
    out = []
    for kind in np.unique(kinds):
        var = variance[kinds == kind]
        # whether the repeats differ, not var > 0: equal non-integer scores
        # can leave a variance of 1e-16 by rounding
        differ = changed[kinds == kind]
        reps = bootstrap_pooled_sd(var, ctx.settings.bootstrap, ctx.rng(f"{KEY}:repeats:{kind}"))
        lo, hi = ctx.ci(reps)
        out.append({"judge_kind": kind, "within_sd": float(np.sqrt(var.mean())),
                    "within_sd_lo": float(lo), "within_sd_hi": float(hi),
                    "units_differing_pct": float(100 * np.mean(differ)), "n": int(var.size)})
    return pd.DataFrame(out)


def compute(ctx: Context) -> JudgeReport | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    level, rows = ctx.settings.level, data.rows
    return JudgeReport(_calls(data.calls, rows, level), _cost(data, level),
                       _answering(data, level), _latency(data.run_calls),
                       _latency(data.run_attempts, endpoint=True),
                       _failures(data, level), _position(data, level), _length(data, ctx),
                       _repeats(data, ctx))


def _calls_links(calls: pd.DataFrame, base: str | None) -> pd.DataFrame:
    """With a viewer: each judge links to its judgments there, each count of a
    parse status to those judgments, the not-parsed share to all that did not parse."""
    if base is None:
        return calls
    judges = [f"{k}: {m}" for k, m in zip(calls["judge_kind"], calls["judge_model"], strict=True)]
    links = {"judge_model_href": [viewer_href(base, judge=j) for j in judges],
             "not_parsed_pct_href": [viewer_href(base, judge=j, parse="not-ok") for j in judges]}
    for status in vocabulary.PARSE_STATUSES:
        links[f"{status}_href"] = [viewer_href(base, judge=j, parse=status) for j in judges]
    return calls.assign(**links)


def present(result: JudgeReport, ctx: Context) -> Section:
    calls = result.calls
    fig = Figure(f"{KEY}_parse", "Judge outputs that did not parse, per judge", Bars(
        labels=[f"{k}: {m}" for k, m in zip(calls["judge_kind"], calls["judge_model"],
                                            strict=True)],
        est=json_list(calls["not_parsed_pct"]), lo=json_list(calls["not_parsed_pct_lo"]),
        hi=json_list(calls["not_parsed_pct_hi"]), n=calls["n"].astype(int).tolist(),
        y_label="not parsed % of calls (Wilson CI)"),
        caption="Unparsed or failed calls keep their raw output and get no score.")
    tables = {name: frame for name, frame in (
        ("calls", _calls_links(calls, ctx.settings.viewer)), ("cost", result.cost),
        ("answering_cost", result.answering),
        ("latency", result.latency), ("latency_by_endpoint", result.endpoints),
        ("failures", result.failures),
        ("position", result.position), ("length", result.length),
        ("repeats", result.repeats)) if len(frame)}
    return Section(KEY, TITLE, _summary(result), tables, [fig], _values(result))


def _values(result: JudgeReport) -> dict:
    cost = pd.concat([result.cost, result.answering])
    values = {"calls": int(result.calls["n"].sum()), "rows": int(result.calls["rows"].sum()),
              "not_parsed": int((result.calls["n"] - result.calls[OK]).sum()),
              "list_price_usd": float(cost["list_price_usd"].sum()),
              "spent_usd": _known(cost["spent_usd"].sum(min_count=1))}
    if len(result.position):
        row = result.position.iloc[0]
        values |= {"first_shown_wins_pct": float(row["share_pct"]),
                   "position_bias": bool(row["share_pct_lo"] > 50 or row["share_pct_hi"] < 50)}
    return values


def _known(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _summary(result: JudgeReport) -> str:
    v = _values(result)
    text = (f"{v['calls']:,} judge calls ({v['rows']:,} judgment rows);"
            f" {v['not_parsed']:,} calls did not parse and are counted, not scored."
            f" At list price the answers and judgments cost ${v['list_price_usd']:,.4f}"
            " (cache hits included); ")
    text += ("the runs spent" f" ${v['spent_usd']:,.4f} (calls that reached an endpoint)."
             if v["spent_usd"] is not None else
             "what the runs spent is in their database, not in this source.")
    if len(result.position):
        row = result.position.iloc[0]
        text += (f" The pairwise judge picked the answer it saw first in"
                 f" {row_pct(row, 'share_pct')} of {int(row['n']):,} decided calls"
                 + (" — a position bias." if v["position_bias"] else "; no position bias."))
    return text


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Automated judge calls by kind and parse status, their cost at list price and"
    " what the runs spent, latency, tokens and failures by cause, and the"
    " pairwise judge's position and length preference and run-to-run variance.",
    section, needs_judgments=True)
