"""Self-preference: does a judge score answers of its own model family
higher than the references do?

For each judge of a scored kind (jury, rubric) that is also a candidate (the
same family by the ``self_preference_by`` setting), an answer's deviation is
the judge's composite (mean over criteria, axes and repeats) minus what a
reference predicts for it, by a least-squares line fitted on the answers of
other families:

- the other judges of the same kind on the same answer (their mean);
- the clinicians (each rater's composite z-scored within rater, then averaged
  per answer).

Self-preference is the mean deviation on own-family answers minus that on
the rest (answers of families that no judge of the kind belongs to), in the
judge's own scale points, so the judge's leniency, its imperfect agreement
and the answers' quality as the reference sees it do not pass for bias
(:func:`clinieval.stats.self_preference`). Bootstrap CIs resample answers
within each group.
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
from clinieval.stats import self_preference

KEY, TITLE = "self_preference", "Judge self-preference"
SCORED_KINDS = ("jury", "rubric")
MIN_ANSWERS = 2
"""Answers needed in each group (own family, the rest) for an estimate."""
TOLERANCE = 1e-9
"""Scale points below which a bound counts as zero: a judge that gives every
answer the same score leaves residuals of rounding noise (about 1e-16)."""


@dataclass
class SelfPreference:
    table: pd.DataFrame
    flat: list[str]
    """Judges (kind: model) that gave every answer compared the same score."""


def _family(ids: pd.Series, data: Judged, by: str) -> np.ndarray:
    if by == "model":
        return ids.to_numpy(object)
    models = data.tables["models"].to_pandas()
    provider = dict(zip(models["model_id"], models.get("provider", models["model_id"]),
                        strict=True))
    return np.array([provider.get(i) or i for i in ids], dtype=object)


def _composites(data: Judged, by: str) -> pd.DataFrame:
    rows = data.rows[data.rows["ok"] & data.rows["judge_kind"].isin(SCORED_KINDS)]
    comp = rows.groupby(["judge_kind", "judge_model", "answer_id", "model_id"],
                        as_index=False)["score"].mean()
    comp["judge_family"] = _family(comp["judge_model"], data, by)
    comp["family"] = _family(comp["model_id"], data, by)
    comp["own"] = comp["judge_family"] == comp["family"]
    return comp


def _clinician_z(ctx: Context) -> pd.Series:
    """Per answer code: the mean over its clinicians of each clinician's
    composite, z-scored within that clinician."""
    d = ctx.data
    frame = pd.DataFrame({"answer": d.rating_answer, "rater": d.rating_rater,
                          "score": d.rating_score.astype(float)})
    comp = frame.groupby(["answer", "rater"], as_index=False)["score"].mean()
    by = comp.groupby("rater")["score"]
    sd = by.transform("std")
    comp["z"] = (comp["score"] - by.transform("mean")) / sd.where(sd > 0)
    return comp.groupby("answer")["z"].mean()


def _row(judge: tuple[str, str], reference: str, score: np.ndarray, ref: np.ndarray,
         own: np.ndarray, ctx: Context) -> dict | None:
    keep = np.isfinite(score) & np.isfinite(ref)
    score, ref, own = score[keep], ref[keep], own[keep]
    if own.sum() < MIN_ANSWERS or (~own).sum() < MIN_ANSWERS or np.ptp(ref[~own]) == 0:
        return None
    c = self_preference(score, ref, own, ctx.settings.bootstrap,
                        ctx.rng(f"{KEY}:{judge[0]}:{judge[1]}:{reference}"), ctx.settings.level)
    return {"judge_kind": judge[0], "judge": judge[1], "reference": reference,
            "self_preference": c.difference, "self_preference_lo": c.lower,
            "self_preference_hi": c.upper, "p_value": c.p_value, "n_own": int(own.sum()),
            "n_other": int((~own).sum())}


def _judge_rows(judge, mine: pd.DataFrame, comp: pd.DataFrame, clin: pd.Series,
                data: Judged, ctx: Context) -> list[dict] | None:
    """The judge's rows against each reference; None when it gave every
    answer the same score."""
    peers = comp[(comp["judge_kind"] == judge[0]) & (comp["judge_model"] != judge[1])]
    # The rest are answers of families no judge of this kind belongs to: a
    # peer's own bias must not shift the reference on the answers compared.
    judging = set(peers["judge_family"])
    mine = mine[mine["own"] | ~mine["family"].isin(judging)]
    own, score = mine["own"].to_numpy(), mine["score"].to_numpy(float)
    if np.ptp(score) == 0:
        return None  # no variation: nothing for a line to follow, nor a bias to show
    others = peers.groupby("answer_id")["score"].mean().reindex(mine["answer_id"])
    clinicians = clin.reindex(data.answers.index.get_indexer(mine["answer_id"]))
    rows = [_row(judge, "other judges", score, others.to_numpy(float), own, ctx),
            _row(judge, "clinicians", score, clinicians.to_numpy(float), own, ctx)]
    return [r for r in rows if r is not None]


def compute(ctx: Context) -> SelfPreference | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    outage = data.unparsed_only(SCORED_KINDS)
    if outage:
        return Skipped(outage)
    by = ctx.settings.self_preference_by
    comp = _composites(data, by)
    candidates = comp.groupby(["judge_kind", "judge_model"])["own"].any()
    if not candidates.any():
        return Skipped(f"no scoring judge is also a candidate (same {by}).")
    clin = _clinician_z(ctx)
    rows, flat = [], []
    for judge in candidates[candidates].index:
        mine = comp[(comp["judge_kind"] == judge[0]) & (comp["judge_model"] == judge[1])]
        found = _judge_rows(judge, mine, comp, clin, data, ctx)
        rows += found or []
        flat += [] if found is not None else [f"{judge[0]}: {judge[1]}"]
    if flat and not rows:
        return Skipped(_flat_words(flat) + ".")
    if not rows:
        return Skipped(f"judges that are also candidates have fewer than {MIN_ANSWERS} answers"
                       " with a reference in a group.")
    return SelfPreference(pd.DataFrame(rows), flat)


def _flat_words(flat: list[str]) -> str:
    return (f"no variation: {', '.join(flat)} gave every answer the same score, so"
            " self-preference is not measured")


def present(result: SelfPreference, ctx: Context) -> Section:
    t = result.table
    fig = Figure(f"{KEY}_forest", "Self-preference per judge and reference", Forest(
        labels=[f"{j} vs {r}" for j, r in zip(t["judge"], t["reference"], strict=True)],
        est=json_list(t["self_preference"]), lo=json_list(t["self_preference_lo"]),
        hi=json_list(t["self_preference_hi"]), n=t["n_own"].astype(int).tolist(),
        x_label="self-preference (judge scale points)", ref=0.0),
        caption="Mean residual of the judge on its own family's answers minus on the rest,"
        " the judge regressed on the reference over other answers; n counts own-family"
        " answers; bootstrap CI.")
    biased = t[t["self_preference_lo"] > TOLERANCE]
    values = {"self_preferring": sorted(set(biased["judge"])),
              "family_by": ctx.settings.self_preference_by}
    summary = _summary(t, biased, ctx) + (f" {_flat_words(result.flat).capitalize()}."
                                          if result.flat else "")
    return Section(KEY, TITLE, summary, {"self_preference": t}, [fig], values)


def _summary(t: pd.DataFrame, biased: pd.DataFrame, ctx: Context) -> str:
    by = ctx.settings.self_preference_by
    if biased.empty:
        return (f"No judge scores its own family's answers ({by}) detectably higher than the"
                f" references ({len(t)} comparisons).")
    parts = [f"{r['judge']} vs {r['reference']}"
             f" {fmt_ci(r['self_preference'], r['self_preference_lo'], r['self_preference_hi'])}"
             f" points (n = {r['n_own']} own answers)" for _, r in biased.iterrows()]
    return "Self-preference: " + "; ".join(parts) + "."


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "Whether a judge scores answers of its own model family higher than"
    " the clinicians and the other judges do, with bootstrap CIs.",
    section, needs_judgments=True, optional=True)
