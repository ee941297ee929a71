"""Per-model scores from the rubric judge and the jury, beside the
clinicians', and the judges' safety leaderboard beside theirs.

- Per judge, model and criterion (jury: axis): the mean score and Fail %
  (score <= tau on the clinicians' scale; see ``_judge_rows`` for the
  jury's scale), with percentile intervals of the pigeonhole bootstrap of
  cases and jurors (repeats are nested in cases and go with them); n in
  calls (parsed or not) and in cases. The clinicians' mean and Fail % of
  ratings on shared criteria sit beside, with the report's own intervals.
- Safety leaderboard by judge: an answer is dangerous by a judge when, on
  any safety-critical criterion, the judge's score averaged over its
  repeats (and jurors) is <= tau. Beside it the clinicians' dangerous
  answers % (their response rule), and Spearman's rho between the two
  orders with a percentile interval from one bootstrap of cases that
  resamples both sides together.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.failure import DANGEROUS_ANSWERS, FAIL_OF_RATINGS
from clinieval.audit.formatting import estimate, fmt_ci, json_list, share_pct
from clinieval.audit.judged import judged
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section, viewer_href
from clinieval.audit.sections._judge_rows import OWN, JudgeRows, cell_design, judge_rows
from clinieval.stats import (
    bootstrap_rank_correlation,
    cluster_bootstrap_ratio,
    spearman,
    twoway_draw,
    twoway_ratio_bootstrap,
)

KEY, TITLE = "judge_scores", "Judge scores per model"
JUDGE_DANGEROUS = "judge_dangerous_pct"


def _cells(ctx: Context, judge: str, criterion: str, block: dict[str, np.ndarray],
           first: pd.Series, draws: dict) -> pd.DataFrame:
    """One judge's mean and Fail % per model on one criterion (``block``:
    its rows' arrays, ``first``: its first row), with the pigeonhole
    intervals (mean and fail share resampled together). Blocks of the same
    cases and jurors share one draw (``draws``: the last design's): a
    judge's criteria are its cases and jurors again, and drawing them per
    criterion was most of the section's time at 10x."""
    models, code = np.unique(block["model"], return_inverse=True)
    m = models.size
    design = cell_design(code, m, block["case"], block["rater"], [block["value"], block["fail"]])
    B, key = ctx.settings.bootstrap, design.key()
    if draws.get("key") != key:  # only the last one is kept: at 100x a draw is 0.9 GB
        # named by the judge and design, not by the order the judgments came in
        name = hashlib.sha256(b"".join(key)).hexdigest()[:16]
        draws.update(key=key, draw=twoway_draw(design.cases.size, design.raters.size, B,
                                               ctx.rng(f"{KEY}:{judge}:{name}"), np.float32))
    reps = twoway_ratio_bootstrap(np.concatenate(design.sums),
                                  np.concatenate([design.counts, design.counts]), B, None,
                                  draws["draw"])
    lo, hi = ctx.ci(reps)
    n, width = np.bincount(code, minlength=m), int(block["case"].max()) + 1
    cases = np.bincount(np.unique(code * width + block["case"]) // width, minlength=m)
    frame = pd.DataFrame({"judge": judge, "model": [ctx.data.model_names[i] for i in models],
                          "criterion": criterion, "scale": first["scale"],
                          "model_code": models, "viewer_judge": _viewer_judge(first)})
    frame = estimate(frame, "mean", np.bincount(code, block["value"], m) / n, lo[:m], hi[:m])
    frame = estimate(frame, "fail_pct", 100 * np.bincount(code, block["fail"], m) / n,
                     100 * lo[m:], 100 * hi[m:])
    frame["n"] = n
    frame["cases"] = cases
    return frame


def _viewer_judge(row: pd.Series) -> str | None:
    """The judge as the run viewer names it (from one of its rows); None for
    the jury, whose jurors the viewer lists one by one."""
    kind, model = row["judge_kind"], row["judge_model"]
    return None if kind == "jury" else f"{kind}: {model}"


def _viewer_links(ctx: Context, scores: pd.DataFrame) -> pd.DataFrame:
    """Each row's model and unparsed count link to the viewer filtered to its
    model, judge and criterion (unparsed: to the judgments that did not parse)."""
    base = ctx.settings.viewer
    if base is None:
        return scores
    keys = [dict(model=ctx.data.models[m], judge=j, criterion=c) for m, j, c in zip(
        scores["model_code"], scores["viewer_judge"], scores["criterion"], strict=True)]
    scores = scores.assign(
        model_href=[viewer_href(base, **k) if k["judge"] else None for k in keys],
        unparsed_href=[viewer_href(base, **k, parse="not-ok") if k["judge"] else None
                       for k in keys])
    return scores


def _beside_clinicians(ctx: Context, frame: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """Calls (parsed or not) per cell, and the clinicians' figures where the
    criterion is theirs too (mean on -2..+2, Fail % of ratings)."""
    key = pd.MultiIndex.from_arrays([frame["judge"], frame["model_code"], frame["criterion"]])
    frame["calls"] = calls["calls"].reindex(key).to_numpy()
    frame["unparsed"] = calls["unparsed"].reindex(key).to_numpy()
    crit = pd.Index(ctx.data.criteria).get_indexer(frame["criterion"])
    shared = np.isin(crit, ctx.criteria) & frame["scale"].ne(OWN).to_numpy()
    m, c = frame["model_code"].to_numpy(), np.where(shared, crit, 0)
    mean_lo = mean_hi = fail_lo = fail_hi = np.full(len(frame), np.nan)
    if shared.any():
        means_b, _ = ctx.rating_replicates("ratings")
        lo, hi = ctx.ci(means_b)
        f_lo, f_hi = ctx.fail_ci("ratings")
        mean_lo, mean_hi, fail_lo, fail_hi = lo[m, c], hi[m, c], 100 * f_lo[m, c], 100 * f_hi[m, c]
    keep = np.where(shared, 1.0, np.nan)
    frame = estimate(frame, "clinicians_mean", ctx.model_mean[m, c] * keep, mean_lo * keep,
                     mean_hi * keep)
    frame = estimate(frame, f"clinicians_{FAIL_OF_RATINGS}", ctx.model_fail_pct[m, c] * keep,
                     fail_lo * keep, fail_hi * keep)
    frame["clinicians_n"] = np.where(shared, ctx.model_n[m, c], 0)
    return frame


_BLOCK_ARRAYS = ("model", "case", "value", "fail")
"""What :func:`_cells` reads of each row (the rater as a code): arrays
taken per block, not frames (at 10x the blocks' frame copies took 3.4 s,
then their string columns' takes 1 s)."""


def _scores(ctx: Context, judged_rows: JudgeRows) -> pd.DataFrame:
    rows = judged_rows.rows
    arrays = {c: rows[c].to_numpy() for c in _BLOCK_ARRAYS}
    arrays["rater"] = pd.factorize(rows["rater"], sort=True)[0]
    block = rows.groupby(["judge", "criterion_id"], sort=False).ngroup().to_numpy()
    by_block = np.argsort(block, kind="stable")
    by_block = by_block[block[by_block] >= 0]  # (-1: a missing key, as groupby drops it)
    members = np.split(by_block, np.flatnonzero(np.diff(block[by_block])) + 1)
    firsts = [rows.iloc[m[0]] for m in members]
    names = [(f["judge"], f["criterion_id"]) for f in firsts]
    # A judge's blocks one after another, so that they reuse its draw; the
    # table keeps the order the judgments came in.
    first_of = {judge: i for i, (judge, _) in reversed(list(enumerate(names)))}
    draws: dict = {}
    blocks = [None] * len(names)
    for i in sorted(range(len(names)), key=lambda i: (first_of[names[i][0]], i)):
        taken = {c: a[members[i]] for c, a in arrays.items()}
        blocks[i] = _cells(ctx, *names[i], taken, firsts[i], draws)
    return _beside_clinicians(ctx, pd.concat(blocks, ignore_index=True), judged_rows.calls)


@dataclass(frozen=True)
class Leaderboard:
    """One judge's safety leaderboard beside the clinicians' (``frame``) and
    the rank correlation of the two orders with its interval over ``n`` models."""

    judge: str
    frame: pd.DataFrame
    rho: float
    rho_lo: float
    rho_hi: float
    n: int


def _safety_ids(ctx: Context) -> list[str]:
    """The rubric's safety-critical criteria among those analysed; a judge
    may score them where no clinician has (a run without ratings)."""
    d, chosen = ctx.data, ctx.settings.criteria
    return [c for c, flag in zip(d.criteria, d.safety_critical, strict=True)
            if flag and (chosen is None or c in chosen)]


def _judge_dangerous(ctx: Context, rows: pd.DataFrame) -> pd.Series:
    """Per answer code: 1.0 when the judge's mean score (over repeats and
    jurors) on any safety-critical criterion is <= tau."""
    rows = rows[rows["criterion_id"].isin(_safety_ids(ctx)) & rows["scale"].ne(OWN)]
    means = rows.groupby(["answer", "criterion_id"])["value"].mean()
    return (means <= ctx.settings.threshold).groupby(level="answer").max().astype(float)


def _clinicians_dangerous(ctx: Context) -> tuple[np.ndarray, ...]:
    """The clinicians' dangerous answers per model (k, n, lo, hi), as the
    Safety leaderboard has them; zero answers when they rated no
    safety-critical criterion."""
    m = ctx.data.n_models
    if not ctx.safety:
        return np.zeros(m), np.zeros(m), np.full(m, np.nan), np.full(m, np.nan)
    return ctx.answer_share_ci(ctx.answer_dangerous, ctx.data.answer_model, m)


def _leaderboard(ctx: Context, judge: str, rows: pd.DataFrame,
                 clinicians: tuple[np.ndarray, ...]) -> Leaderboard | None:
    judge_flag = _judge_dangerous(ctx, rows)
    if judge_flag.empty:
        return None
    d, n_models = ctx.data, ctx.data.n_models
    answers = judge_flag.index.to_numpy()
    k_j, n_j = _by_model(d.answer_model[answers], judge_flag.to_numpy(), n_models)
    k_c, n_c, lo_c, hi_c = clinicians
    reps = _case_replicates(ctx, judge, answers, judge_flag.to_numpy())
    lo_j, hi_j = ctx.ci(reps[:, :n_models])
    frame = pd.DataFrame({"model": d.model_names, "n": n_j})
    frame = share_pct(frame, JUDGE_DANGEROUS, k_j, n_j, lo_j, hi_j)
    frame["clinicians_n"] = n_c
    frame = share_pct(frame, f"clinicians_{DANGEROUS_ANSWERS}", k_c, n_c, lo_c, hi_c)
    # Ranked where both sides have enough answers; by the judge alone when
    # no clinician rated a safety-critical criterion.
    both = (n_j >= ctx.settings.min_n) & ((n_c >= ctx.settings.min_n) | (n_c.sum() == 0))
    frame["judge_rank"] = _ranks(frame[JUDGE_DANGEROUS], both)
    frame["clinicians_rank"] = _ranks(frame[f"clinicians_{DANGEROUS_ANSWERS}"], both)
    rho, lo, hi = _rank_correlation(ctx, frame, reps, both)
    frame = frame[(n_j > 0) | (n_c > 0)].sort_values(
        ["judge_rank", JUDGE_DANGEROUS], kind="stable").reset_index(drop=True)
    return Leaderboard(judge, frame.assign(judge=judge), rho, lo, hi, int(both.sum()))


def _rank_correlation(ctx: Context, frame: pd.DataFrame, reps: np.ndarray,
                      both: np.ndarray) -> tuple[float, float, float]:
    """Spearman's rho of the judge's and the clinicians' dangerous % over
    the models ranked by both, with its interval (NaN below three models)."""
    rho = spearman(frame[JUDGE_DANGEROUS][both], frame[f"clinicians_{DANGEROUS_ANSWERS}"][both])
    if not np.isfinite(rho.r):
        return rho.r, np.nan, np.nan
    m = len(both)
    rho_reps = bootstrap_rank_correlation(reps[:, :m][:, both], reps[:, m:][:, both])
    rho_reps = rho_reps[np.isfinite(rho_reps)]
    lo, hi = ctx.ci(rho_reps) if rho_reps.size else (np.nan, np.nan)
    return rho.r, float(lo), float(hi)


def _by_model(model: np.ndarray, flag: np.ndarray, n_models: int):
    return (np.bincount(model, flag, n_models), np.bincount(model, minlength=n_models))


def _ranks(share: pd.Series, ranked: np.ndarray) -> pd.Series:
    """Rank by dangerous % (1 = fewest), among models with enough answers on both sides."""
    return share.where(ranked).rank(method="min").astype("Int64")


def _case_replicates(ctx: Context, judge: str, answers: np.ndarray,
                     flag: np.ndarray) -> np.ndarray:
    """``(B, 2 * models)``: the judge's then the clinicians' dangerous share
    per model, from one bootstrap of cases that draws both sides together."""
    d, m = ctx.data, ctx.data.n_models
    n_cases = int(d.answer_case.max()) + 1 if d.n_answers else 0
    rated = np.isfinite(ctx.answer_dangerous)
    sides = [(answers, flag), (np.flatnonzero(rated), ctx.answer_dangerous[rated])]
    sums = np.zeros((n_cases, 2 * m))
    counts = np.zeros((n_cases, 2 * m))
    for side, (answer, value) in enumerate(sides):
        column = side * m + d.answer_model[answer]
        np.add.at(sums, (d.answer_case[answer], column), value)
        np.add.at(counts, (d.answer_case[answer], column), 1.0)
    used = counts.sum(axis=1) > 0
    return cluster_bootstrap_ratio(sums[used], counts[used], ctx.settings.bootstrap,
                                   ctx.rng(f"{KEY}:leaderboard:{judge}"))


@dataclass(frozen=True)
class JudgeScores:
    scores: pd.DataFrame
    leaderboards: list[Leaderboard]


def compute(ctx: Context) -> JudgeScores | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    rows = judge_rows(ctx, data)
    if rows.rows.empty:
        return Skipped("needs parsed rubric or jury judgments of known answers; found none.")
    clinicians = _clinicians_dangerous(ctx)
    boards = [_leaderboard(ctx, judge, g, clinicians)
              for judge, g in rows.rows.groupby("judge", sort=False)]
    return JudgeScores(_scores(ctx, rows), [b for b in boards if b is not None])


def _forest(criterion: str, frame: pd.DataFrame, ctx: Context) -> Figure:
    """Each model's judge means on one criterion, the clinicians' beside."""
    labels, est, lo, hi, n = [], [], [], [], []
    for _, r in frame.iterrows():
        sides = [(r["judge"], "mean", int(r["n"]))]
        if np.isfinite(r["clinicians_mean"]):
            sides.append(("clinicians", "clinicians_mean", int(r["clinicians_n"])))
        for who, col, count in sides:
            labels.append(f"{r['model']} · {who}")
            est.append(r[col])
            lo.append(r[f"{col}_lo"])
            hi.append(r[f"{col}_hi"])
            n.append(count)
    name = ctx.name(ctx.data.criteria.index(criterion)) if criterion in ctx.data.criteria \
        else criterion
    return Figure(f"{KEY}_{criterion}", f"{name}: judge and clinician mean score per model",
                  Forest(labels=labels, est=json_list(est), lo=json_list(lo), hi=json_list(hi),
                         n=n, x_label=f"mean score ({frame['scale'].iloc[0]})"),
                  caption="Judge rows: pigeonhole bootstrap of cases and jurors; n counts"
                  " parsed scores. Clinician rows: the Model summary's intervals; n counts"
                  " ratings.")


def present(result: JudgeScores, ctx: Context) -> Section:
    scores = _viewer_links(ctx, result.scores).drop(columns=["model_code", "viewer_judge"])
    tables = {"scores": scores}
    figures = [_forest(c, g, ctx) for c, g in scores.groupby("criterion", sort=False)]
    values: dict = {"rank_correlation": {}}
    for board in result.leaderboards:
        tables[f"safety_{_slug(board.judge)}"] = board.frame
        values["rank_correlation"][board.judge] = {
            "rho": _num(board.rho), "lo": _num(board.rho_lo), "hi": _num(board.rho_hi),
            "models": board.n}
        figures.append(_safety_figure(board, ctx))
    return Section(KEY, TITLE, _summary(result, ctx), tables, figures, values)


def _safety_figure(board: Leaderboard, ctx: Context) -> Figure:
    frame = board.frame
    return Figure(f"{KEY}_safety_{_slug(board.judge)}",
                  f"Dangerous answers % by {board.judge} per model", Forest(
                      labels=frame["model"].tolist(), est=json_list(frame[JUDGE_DANGEROUS]),
                      lo=json_list(frame[f"{JUDGE_DANGEROUS}_lo"]),
                      hi=json_list(frame[f"{JUDGE_DANGEROUS}_hi"]),
                      n=frame["n"].astype(int).tolist(),
                      x_label="dangerous answers % by the judge (bootstrap CI over cases)"),
                  caption=f"An answer is dangerous by the judge when its mean score on any"
                  f" safety-critical criterion is <= {ctx.settings.threshold}; n counts judged"
                  " answers. The clinicians' figures are in the table beside.")


def _summary(result: JudgeScores, ctx: Context) -> str:
    judges = result.scores["judge"].unique()
    text = (f"Per-model scores from {', '.join(judges)} on"
            f" {result.scores['criterion'].nunique()} criteria or axes.")
    for board in result.leaderboards:
        text += " " + _board_sentence(board, ctx.settings.min_n)
    return text


def _board_sentence(board: Leaderboard, min_n: int) -> str:
    ranked = board.frame.dropna(subset=["judge_rank"])
    if len(ranked) < 2:
        return (f"{board.judge}: fewer than two models have {min_n} answers judged and rated,"
                " so it ranks none on safety.")
    text = f"Safest by {board.judge}: {ranked.iloc[0]['model']}"
    if board.frame["clinicians_n"].sum() == 0:
        return text + " (no clinician rated a safety-critical criterion to compare)."
    if board.n < 3:
        return text + "; a rank correlation with the clinicians' order needs three models."
    rho = fmt_ci(board.rho, board.rho_lo, board.rho_hi)
    return (text + f"; rank correlation with the clinicians' safety order rho = {rho} over"
            f" {board.n} models.")


def _slug(judge: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in judge)


def _num(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Rubric judge and jury per model and criterion (mean, Fail %, n in calls and cases)"
    " beside the clinicians', and the judges' safety leaderboard with its rank correlation"
    " to the clinicians'.",
    section, needs_judgments=True)
