"""Benchmarks and cost (MedHELM): models compared over a registry of
benchmarks placed in a task taxonomy, and what the evaluation cost.

- Instance scores are normalised to 0-1 by their benchmark's registry entry
  (linear from the range, clipped; flipped when lower is better); a
  benchmark's score is the mean over its instances.
- Macro-average: mean over benchmarks, each weighted equally, with the SD
  over benchmarks. Win rate: the share of (benchmark, rival) meetings won,
  ties by the ``win_ties`` setting, with the SD over benchmarks of each
  model's per-benchmark win share (MedHELM's Table 1).
- Intervals: instances are resampled within each benchmark (paired over
  models); for the macro-average and win rate the benchmarks are resampled
  too. Per-category means use the instance resampling only.
- Results ``clinieval run`` stored in the audited database are read as
  they are (:func:`stored_instances`), beside any ``--benchmark-scores``
  file: samples are averaged per instance, parse failures counted and shown
  (never a zero), and Worst@k reported per model and benchmark.
- Cost per model, split into answering (stored cost, else tokens x the
  model's price) and judging (the judgments of its answers), beside the win
  rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, fmt_ci, json_list
from clinieval.audit.judged import Judged, judged
from clinieval.audit.result import Figure, Heatmap, Scatter, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.catalogs import BenchmarkRegistry, load_benchmarks
from clinieval.errors import InputError
from clinieval.io.foreign.benchmark_scores import read_benchmark_scores
from clinieval.stats import (
    group_mean_ci,
    instance_replicates,
    macro_average,
    resample_benchmarks,
    win_shares,
)
from clinieval.stats.benchmarks import TIE_RULES

KEY, TITLE = "benchmarks", "Benchmarks and cost"
STORED_RULE = ("clinieval run's results in the audited database: per model and benchmark the"
               " latest scored run's first scorer; a case's score is the mean over its scored"
               " samples; unparsed, error and failed samples are counted, not scored;"
               " Worst@k over cases whose k samples were all scored")
UNREGISTERED = "(not in the registry)"


@dataclass
class Benchmarks:
    models: list[str]
    registry: pd.DataFrame
    """One row per scored benchmark: id, label, category, subcategory, metric."""
    table: np.ndarray
    """(models, benchmarks) normalised mean scores."""
    n: np.ndarray
    """(models, benchmarks) scored instances."""
    scores: pd.DataFrame
    overall: pd.DataFrame
    categories: pd.DataFrame
    cost: pd.DataFrame


def _registry_frame(ids: list[str], registry: BenchmarkRegistry) -> pd.DataFrame:
    known = {b.benchmark_id: b for b in registry.benchmarks}
    rows = []
    for bench in ids:
        b = known.get(bench)
        rows.append({"benchmark": bench, "label": b.label if b else "",
                     "category": b.category if b else UNREGISTERED,
                     "subcategory": b.subcategory if b else UNREGISTERED,
                     "metric": b.metric if b else "unknown",
                     "normalisation": _norm_words(b) if b else "identity (unregistered)"})
    return pd.DataFrame(rows)


def _norm_words(bench) -> str:
    n = bench.normalisation
    text = "identity" if n.kind == "identity" else f"linear {n.low:g}..{n.high:g} to 0..1"
    return text if n.higher_is_better else text + ", flipped (lower is better)"


def normalised(frame: pd.DataFrame, registry: BenchmarkRegistry, source: str) -> np.ndarray:
    """Each instance score mapped to 0..1 by its benchmark's normalisation;
    an unregistered benchmark must already be on 0..1."""
    known = {b.benchmark_id: b.normalisation for b in registry.benchmarks}
    raw = frame["score"].to_numpy(float)
    out = raw.copy()
    for bench, rows in frame.groupby("benchmark_id").indices.items():
        n = known.get(bench)
        if n is None:
            bad = rows[(raw[rows] < 0) | (raw[rows] > 1)]
            if bad.size:
                raise InputError(source, "score outside 0..1 for a benchmark the registry does"
                                 " not list", row=int(bad[0]) + 1, field="score",
                                 expected="a registry entry with its normalisation",
                                 got=float(raw[bad[0]]))
            continue
        out[rows] = n.apply_many(raw[rows])
    return out


def _blocks(frame: pd.DataFrame, models: list[str], benches: list[str]):
    """One (instances, models) array per benchmark, NaN where unscored."""
    blocks = []
    for bench in benches:
        part = frame[frame["benchmark_id"] == bench]
        wide = part.pivot(index="instance_id", columns="model_id", values="norm")
        blocks.append(wide.reindex(columns=models).to_numpy(float))
    return blocks


def compute(ctx: Context) -> Benchmarks | Skipped:
    s = ctx.settings
    stored = ctx.data.benchmark_results
    if s.benchmark_scores is None and stored is None:
        return Skipped("needs per-instance benchmark scores (--benchmark-scores, or results"
                       " `clinieval run` stored in the audited database).")
    registry = load_benchmarks(s.benchmarks)
    frames, outcomes = [], None
    if s.benchmark_scores is not None:
        frames.append(read_benchmark_scores(s.benchmark_scores).to_pandas())
    if stored is not None:
        samples, entries = stored
        listed = {b.benchmark_id for b in registry.benchmarks}
        registry = registry.model_copy(update={"benchmarks": [
            *registry.benchmarks, *[e for e in entries if e.benchmark_id not in listed]]})
        instances, outcomes = stored_instances(samples, registry)
        frames.append(instances)
    frame = pd.concat(frames, ignore_index=True)
    if frame.empty:
        return Skipped("no stored benchmark sample was scored (every one unparsed, an error"
                       " or a failed call): see `clinieval run`'s table.")
    frame["norm"] = normalised(frame, registry, s.benchmark_scores or "stored results")
    models = sorted(frame["model_id"].unique())
    benches = sorted(frame["benchmark_id"].unique())
    blocks = _blocks(frame, models, benches)
    table = np.column_stack([macro_average(b.T) for b in blocks])  # mean over instances
    n = np.column_stack([(~np.isnan(b)).sum(axis=0) for b in blocks])
    reps = instance_replicates(blocks, s.bootstrap, ctx.rng(f"{KEY}:instances"))
    wide = resample_benchmarks(reps, ctx.rng(f"{KEY}:benchmarks"))
    reg = _registry_frame(benches, registry)
    data = judged(ctx.data.judge_tables)
    names = [data.name(m) for m in models] if data is not None else models
    cost = _cost(frame, data, models, ctx).assign(model=names)
    scores = _scores(names, reg, table, n, reps, ctx)
    if outcomes is not None:
        named = dict(zip(models, names, strict=True))
        outcomes = outcomes.assign(model=outcomes["model_id"].map(named))
        scores = scores.merge(outcomes.drop(columns="model_id").rename(
            columns={"benchmark_id": "benchmark"}), on=["model", "benchmark"], how="left")
    return Benchmarks(names, reg, table, n, scores, _overall(names, table, n, wide, ctx),
                      _categories(names, reg, table, reps, ctx), cost)


def stored_instances(samples: pd.DataFrame, registry: BenchmarkRegistry
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stored sample rows to one score per instance (the mean over its scored
    samples; an instance with none is left out, not scored zero) and, per
    model and benchmark, the samples by outcome and Worst@k: the mean over
    instances whose k samples were all scored of the lowest normalised
    score among them (HealthBench's worst-at-k)."""
    ok = samples[samples["status"] == "ok"].copy()
    known = {b.benchmark_id: b.normalisation for b in registry.benchmarks}
    ok["norm"] = np.nan
    for bench, idx in ok.groupby("benchmark_id").indices.items():
        ok.iloc[idx, ok.columns.get_loc("norm")] = known[bench].apply_many(
            ok["score"].to_numpy(float)[idx])
    keys = ["model_id", "benchmark_id", "instance_id"]
    instances = ok.groupby(keys, sort=False).agg(
        score=("score", "mean"), input_tokens=("input_tokens", "sum"),
        output_tokens=("output_tokens", "sum"), cost_usd=("cost_usd", "sum")).reset_index()
    per = samples.groupby(keys, sort=False).agg(
        k=("status", "size"), scored=("status", lambda v: int((v == "ok").sum())))
    worst = ok.groupby(keys, sort=False)["norm"].min()
    per = per.join(worst.rename("worst"))
    full = per[(per["k"] == per["scored"]) & (per["k"] > 1)].reset_index()
    pair = ["model_id", "benchmark_id"]
    counts = samples.assign(**{f"samples_{o}": samples["status"] == o for o in (
        "unparsed", "error", "failed")}).groupby(pair)[[f"samples_{o}" for o in (
            "unparsed", "error", "failed")]].sum().astype(int)
    counts["samples"] = samples.groupby(pair).size()
    counts["k"] = per.reset_index().groupby(pair)["k"].max()
    counts["worst_at_k"] = full.groupby(pair)["worst"].mean()
    counts["worst_at_k_n"] = full.groupby(pair).size()
    counts["worst_at_k_n"] = counts["worst_at_k_n"].fillna(0).astype(int)
    for column in ("input_tokens", "output_tokens"):
        instances[column] = instances[column].astype(float)
    return instances, counts.reset_index()


def _ci(ctx: Context, replicates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over the replicates where the quantity exists: a
    replicate that drew none of a model's benchmarks (or instances) says
    nothing about it. NaN when none does."""
    tail = (1.0 - ctx.settings.level) / 2.0
    finite = np.isfinite(replicates).any(axis=0)
    safe = np.where(finite, replicates, 0.0)  # all-NaN columns: no warning, masked below
    lo, hi = np.nanquantile(safe, [tail, 1.0 - tail], axis=0)
    return np.where(finite, lo, np.nan), np.where(finite, hi, np.nan)


def _scores(models, reg, table, n, reps, ctx: Context) -> pd.DataFrame:
    lo, hi = _ci(ctx, reps)
    out = []
    for m, model in enumerate(models):
        for k, row in reg.iterrows():
            out.append({"model": model, **row.to_dict(), "score": table[m, k],
                        "score_lo": lo[m, k], "score_hi": hi[m, k], "n": int(n[m, k])})
    return pd.DataFrame(out)


def _overall(models, table, n, wide, ctx: Context) -> pd.DataFrame:
    ties = ctx.settings.win_ties
    other = "geq" if ties == "half" else "half"
    win, per_bench = win_shares(table, ties)
    win_lo, win_hi = _ci(ctx, win_shares(wide, ties)[0])
    macro = macro_average(table)
    macro_lo, macro_hi = _ci(ctx, macro_average(wide))
    frame = pd.DataFrame({"model": models})
    frame = estimate(frame, "win_rate", win, win_lo, win_hi)
    frame["win_sd"] = _sd(per_bench)
    frame[f"win_rate_if_{other}"] = win_shares(table, other)[0]
    frame = estimate(frame, "macro_average", macro, macro_lo, macro_hi)
    frame["macro_sd"] = _sd(table)
    frame["benchmarks"] = (n > 0).sum(axis=1)
    frame["instances"] = n.sum(axis=1)
    return frame.sort_values("win_rate", ascending=False, kind="stable").reset_index(drop=True)


def _sd(table: np.ndarray) -> np.ndarray:
    """SD (ddof 1) of each row over its scored benchmarks; NaN below two."""
    k = (~np.isnan(table)).sum(axis=1)
    centred = table - macro_average(table)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(k > 1, np.sqrt(np.nansum(centred**2, axis=1) / (k - 1)), np.nan)


def _categories(models, reg, table, reps, ctx: Context) -> pd.DataFrame:
    out = []
    for category, idx in reg.groupby("category").indices.items():
        est = macro_average(table[:, idx])
        lo, hi = _ci(ctx, macro_average(reps[:, :, idx]))
        out += [{"category": category, "model": model, "mean": est[m], "mean_lo": lo[m],
                 "mean_hi": hi[m], "benchmarks": len(idx)} for m, model in enumerate(models)]
    return pd.DataFrame(out)


# --- cost -------------------------------------------------------------------------------


def _prices(data: Judged | None) -> pd.DataFrame:
    if data is None or "price_input_per_m" not in data.tables["models"].column_names:
        return pd.DataFrame(columns=["pin", "pout"])
    models = data.tables["models"].to_pandas().set_index("model_id")
    return models[["price_input_per_m", "price_output_per_m"]].set_axis(["pin", "pout"], axis=1)


def _priced(cost, model, tin, tout, prices: pd.DataFrame) -> np.ndarray:
    """Stored cost where known, else input and output tokens x the model's
    prices per million tokens (NaN when neither is known)."""
    pin = prices["pin"].reindex(model).to_numpy(float)
    pout = prices["pout"].reindex(model).to_numpy(float)
    from_tokens = (np.nan_to_num(tin) * pin + np.nan_to_num(tout) * pout) / 1e6
    from_tokens[np.isnan(tin) & np.isnan(tout)] = np.nan
    return np.where(np.isnan(cost), from_tokens, cost)


def _answering(frame: pd.DataFrame, data: Judged | None, prices) -> pd.DataFrame:
    parts = [pd.DataFrame({"model_id": frame["model_id"], "usd": _priced(
        frame["cost_usd"].to_numpy(float), frame["model_id"], frame["input_tokens"].to_numpy(
            float), frame["output_tokens"].to_numpy(float), prices)})]
    if data is not None:
        a = data.answers
        parts.append(pd.DataFrame({"model_id": a["model_id"].to_numpy(), "usd": _priced(
            a["cost_usd"].to_numpy(float), a["model_id"], np.full(len(a), np.nan),
            a["tokens"].to_numpy(float), prices)}))
    return pd.concat(parts, ignore_index=True)


def _judging(data: Judged | None, prices) -> pd.DataFrame:
    if data is None:
        return pd.DataFrame(columns=["model_id", "usd"])
    rows = data.rows
    usd = _priced(rows["cost_usd"].to_numpy(float), rows["judge_model"],
                  rows["input_tokens"].to_numpy(float), rows["output_tokens"].to_numpy(float),
                  prices)
    return pd.DataFrame({"model_id": rows["model_id"].to_numpy(), "usd": usd})


def _cost(frame: pd.DataFrame, data: Judged | None, models: list[str],
          ctx: Context) -> pd.DataFrame:
    prices = _prices(data)
    out = pd.DataFrame({"model": models})
    for part, items in (("answering", _answering(frame, data, prices)),
                        ("judging", _judging(data, prices))):
        items = items[items["model_id"].isin(models)]
        codes = pd.Index(models).get_indexer(items["model_id"])
        usd = items["usd"].to_numpy(float)
        known = ~np.isnan(usd)
        k, mean, lo, hi = group_mean_ci(codes[known], usd[known], len(models), ctx.settings.level)
        out[f"{part}_usd"] = np.bincount(codes[known], usd[known], len(models))
        out[f"{part}_n"] = k
        out[f"{part}_unpriced"] = np.bincount(codes[~known], minlength=len(models))
        out = estimate(out, f"{part}_usd_per_item", mean, lo, hi)
    out["total_usd"] = out["answering_usd"] + out["judging_usd"]
    return out


# --- presentation -----------------------------------------------------------------------


def present(result: Benchmarks, ctx: Context) -> Section:
    s = ctx.settings
    overall, cost = result.overall, result.cost
    figures = [_heatmap(result), _category_heatmap(result)]
    if (cost["total_usd"] > 0).any():
        figures.append(_cost_figure(overall, cost))
    tables = {"overall": overall, "scores": result.scores, "categories": result.categories,
              "registry": result.registry, "cost": cost}
    values = {"leader": str(overall["model"].iloc[0]), "win_ties": s.win_ties,
              "benchmarks": len(result.registry), "models": len(result.models),
              "settings": {"win_ties": TIE_RULES[s.win_ties], "benchmark_scores":
                           s.benchmark_scores, "registry": s.benchmarks or "bundled example",
                           "bootstrap": s.bootstrap,
                           "stored_results": STORED_RULE if ctx.data.benchmark_results
                           is not None else "none in the audited source"}}
    return Section(KEY, TITLE, _summary(result, ctx), tables, figures, values)


def _heatmap(result: Benchmarks) -> Figure:
    order = [result.models.index(m) for m in result.overall["model"]]
    return Figure(f"{KEY}_heatmap", "Normalised score per model and benchmark", Heatmap(
        rows=[result.models[i] for i in order], cols=result.registry["benchmark"].tolist(),
        values=[json_list(result.table[i]) for i in order],
        n=[result.n[i].astype(int).tolist() for i in order], scale="score",
        value_label="normalised score (0-1, higher is better)"),
        caption="Mean over each benchmark's instances after normalisation to 0-1; rows by win"
        " rate; n = scored instances per cell.")


def _category_heatmap(result: Benchmarks) -> Figure:
    cats = result.categories
    rows = result.overall["model"].tolist()
    cols = sorted(cats["category"].unique())
    grid = cats.pivot(index="model", columns="category", values="mean").reindex(rows)[cols]
    return Figure(f"{KEY}_categories", "Mean normalised score per taxonomy category", Heatmap(
        rows=rows, cols=cols, values=[json_list(r) for r in grid.to_numpy()], scale="score",
        value_label="mean of the category's benchmarks (0-1)"),
        caption="Each benchmark of a category weighted equally; intervals in the categories"
        " table resample instances.")


def _cost_figure(overall: pd.DataFrame, cost: pd.DataFrame) -> Figure:
    merged = overall.merge(cost, on="model")
    return Figure(f"{KEY}_cost", "Win rate against evaluation cost", Scatter(
        x=json_list(merged["total_usd"]), y=json_list(merged["win_rate"]),
        labels=merged["model"].tolist(), y_lo=json_list(merged["win_rate_lo"]),
        y_hi=json_list(merged["win_rate_hi"]), x_label="cost of answering + judging (USD)",
        y_label="win rate over benchmarks"),
        caption="Cost from stored costs, else tokens x the model's prices; items without"
        " either are counted as unpriced in the cost table.")


def _summary(result: Benchmarks, ctx: Context) -> str:
    top = result.overall.iloc[0]
    k = len(result.registry)
    text = (f"Over {k} benchmark{'s' if k > 1 else ''}, {top['model']} has the highest win rate,"
            f" {fmt_ci(top['win_rate'], top['win_rate_lo'], top['win_rate_hi'])} (win SD"
            f" {top['win_sd']:.2f}; {TIE_RULES[ctx.settings.win_ties]}), and a macro-average of"
            f" {fmt_ci(top['macro_average'], top['macro_average_lo'], top['macro_average_hi'])}"
            f" (n = {int(top['benchmarks'])} benchmarks, {int(top['instances']):,} instances).")
    if "samples" in result.scores.columns:
        stored = result.scores.dropna(subset=["samples"])
        total = int(stored["samples"].sum())
        bad = {o: int(stored[f"samples_{o}"].sum()) for o in ("unparsed", "error", "failed")}
        text += (f" Of {total:,} stored samples, {bad['unparsed']:,} had no readable answer"
                 f" (unparsed), {bad['error']:,} were errors and {bad['failed']:,} failed calls:"
                 " they are left out of the scores, not counted as wrong.")
        worst = stored.dropna(subset=["worst_at_k"])
        if not worst.empty:
            w = worst.loc[worst["worst_at_k"].idxmin()]
            text += (f" Lowest Worst@{int(w['k'])}: {w['model']} on {w['benchmark']},"
                     f" {w['worst_at_k']:.2f} (n = {int(w['worst_at_k_n'])} cases).")
    cost = result.cost.set_index("model")["total_usd"]
    if (cost > 0).any():
        cheapest = result.overall.merge(result.cost, on="model")
        near = cheapest[cheapest["win_rate_hi"] >= top["win_rate"]]
        # One model has no win rate: no interval reaches it, and there is no rival.
        pick = near.loc[near["total_usd"].idxmin()] if not near.empty else top
        if pick["model"] != top["model"]:
            text += (f" The cheapest model whose interval reaches the leader's win rate is"
                     f" {pick['model']}, at ${pick['total_usd']:,.2f} against"
                     f" ${cost[top['model']]:,.2f} (answering + judging).")
    return text


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))

def headline_lines(section: Section) -> list[str]:
    """The summary, unless skipped (taken as it is, even when empty)."""
    return [] if section.skipped else [section.summary]



SPEC = SectionSpec(
    KEY, TITLE,
    "MedHELM-style win rate and macro-average over a registry of benchmarks,"
    " per-category means, a models x benchmarks heatmap, and cost split into answering and"
    " judging against the win rate.",
    section, optional=True, headline=80, headline_lines=headline_lines)
