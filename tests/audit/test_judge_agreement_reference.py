"""Judges vs clinicians and judge repeats on a small planted snapshot, against
the same figures computed the plain way (pandas merges and groupbys over the
id columns, sklearn's F1 and kappa): the sections read codes and arrays
instead, and these check nothing was lost on the way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.run import build
from clinieval.audit.sections import judges_vs_clinicians as jvc
from clinieval.audit.sections._judge_rows import judge_label
from clinieval.audit.settings import AuditSettings
from clinieval.snapshot import Snapshot
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments
from tests.helpers import with_judgments


@pytest.fixture(scope="module")
def planted():
    return plant_judgments(generate(0, 0.05), JudgePlan(seed=1))


def _context(snap: Snapshot, **overrides) -> Context:
    return Context(audit_data(snap), AuditSettings(**{"bootstrap": 200, **overrides}))


def _judgments(snap: Snapshot) -> pd.DataFrame:
    rows = snap["judgments"].to_pandas()
    answers = snap["answers"].to_pandas().set_index("answer_id")
    return rows.assign(model_id=answers["model_id"].reindex(rows["answer_id"]).to_numpy())


def _verdicts(ctx: Context, snap: Snapshot) -> pd.DataFrame:
    """Each clinician rating of an item the rubric judge scored, with both fail labels."""
    tau, d = ctx.settings.threshold, ctx.data
    rows = _judgments(snap)
    rubric = rows[(rows["judge_kind"] == "rubric") & (rows["parse_status"] == "ok")
                  & rows["score"].notna()]
    judge = rubric.groupby(["answer_id", "criterion_id"])["score"].mean().reset_index()
    judge["judge_fail"] = (judge["score"] <= tau).astype(int)
    ratings = pd.DataFrame({
        "answer_id": snap["answers"]["answer_id"].to_numpy()[d.rating_answer],  # code: row
        "criterion_id": np.asarray(d.criteria, dtype=object)[d.rating_criterion],
        "rater": d.rating_rater, "fail": (d.rating_score <= tau).astype(int)})
    return ratings.merge(judge[["answer_id", "criterion_id", "judge_fail"]])


def test_agreement_and_kappas_equal_a_plain_pandas_and_sklearn_computation(planted):
    ctx = _context(planted)
    section = build(ctx, ["judges_vs_clinicians"])["judges_vs_clinicians"]
    agreement = section.tables["agreement"].set_index("measure")
    verdicts = _verdicts(ctx, planted)
    judge = agreement.loc["rubric judge vs clinicians (Macro-F1, fail/pass)"]
    assert judge["n"] == len(verdicts) > 500
    assert judge["value"] == pytest.approx(
        f1_score(verdicts["fail"], verdicts["judge_fail"], average="macro"), rel=1e-12)

    both = verdicts.merge(verdicts, on=["answer_id", "criterion_id"], suffixes=("", "_other"))
    once = both[both["rater"] < both["rater_other"]]
    per_pair = once.groupby(["rater", "rater_other"]).apply(
        lambda g: f1_score(g["fail"], g["fail_other"], average="macro"), include_groups=False)
    pairs = agreement.loc["clinician vs clinician (Macro-F1, fail/pass; mean over pairs)"]
    assert pairs["n"] == len(per_pair) > 20
    assert pairs["value"] == pytest.approx(per_pair.mean(), rel=1e-12)

    # leave-one-out: the other clinicians' majority on the item (a tie fails)
    others = both[both["rater"] != both["rater_other"]].groupby(
        ["answer_id", "criterion_id", "rater"])["fail_other"].mean().rename("others")
    loo = verdicts.join(others, on=["answer_id", "criterion_id", "rater"], how="inner")
    expected = []
    for rater, g in loo.groupby("rater"):
        if len(g) >= jvc.MIN_ITEMS:
            expected.append({"rater": rater,
                             "judge_kappa": cohen_kappa_score(g["judge_fail"], g["fail"]),
                             "clinicians_kappa": cohen_kappa_score(
                                 (g["others"] >= 0.5).astype(int), g["fail"]),
                             "n": len(g)})
    expected = pd.DataFrame(expected).dropna().reset_index(drop=True)
    kappas = section.tables["leave_one_out_kappa"]
    assert len(kappas) > 10
    pd.testing.assert_frame_equal(kappas, expected, check_exact=False, rtol=1e-9, atol=1e-12,
                                  check_dtype=False)


def test_the_judges_safest_model_is_the_plain_groupbys(planted):
    ctx = _context(planted, min_n=5)
    rows = _judgments(planted)
    safety = [ctx.data.criteria[c] for c in ctx.safety]
    rubric = rows[(rows["judge_kind"] == "rubric") & (rows["parse_status"] == "ok")
                  & rows["score"].notna() & rows["criterion_id"].isin(safety)]
    fails = rubric.groupby(["model_id", "answer_id"])["score"].mean() <= ctx.settings.threshold
    share = fails.groupby(level="model_id").agg(["mean", "size"]).query("size >= 5")
    assert len(share) >= 2 and share["mean"].nunique() > 1
    names = dict(zip(planted["models"].to_pandas()["model_id"],
                     planted["models"].to_pandas()["display_name"], strict=True))
    section = build(ctx, ["judges_vs_clinicians"])["judges_vs_clinicians"]
    assert section.values["judge_safest"] == names[share["mean"].idxmin()]


def test_repeat_spread_per_judge_and_model_equals_a_pandas_groupby_over_the_unit(planted):
    """A second run of every judgment, 30% of scores moved. The preference
    judge's first run names no criterion (missing) and its repeat the empty
    text, and the repeats of the others give their missing order and second
    answer as '': a missing value and '' are one unit value."""
    rng = np.random.default_rng(3)
    rows = planted["judgments"].to_pandas()
    again = rows.assign(repeat=1)
    moved = (rng.random(len(again)) < 0.3) & again["score"].notna()
    again.loc[moved, "score"] = np.where(again.loc[moved, "score"] >= 1, 0.0, 1.0)
    pref = rows["judge_kind"] == "pairwise"
    assert pref.any() and rows["answer_b_id"].isna().any()
    rows.loc[pref, "criterion_id"] = None
    again.loc[pref, "criterion_id"] = ""
    again.loc[again["shown_first"].isna(), "shown_first"] = ""
    again.loc[again["answer_b_id"].isna(), "answer_b_id"] = ""
    snap = with_judgments(planted, pd.concat([rows, again]))
    section = build(_context(snap), ["judge_repeats"])["judge_repeats"]
    frame = section.tables["repeats"]

    both = _judgments(snap)
    ok = both[(both["parse_status"] == "ok") & both["score"].notna()].fillna(
        {"answer_b_id": "", "shown_first": "", "criterion_id": ""})
    unit = ["judge_kind", "judge_model", "answer_id", "answer_b_id", "criterion_id", "juror",
            "shown_first"]
    units = ok.groupby(unit, dropna=False).agg(
        var=("score", "var"), size=("score", "size"), spread=("score", np.ptp),
        model=("model_id", "first")).query("size >= 2").reset_index()
    names = dict(zip(snap["models"].to_pandas()["model_id"],
                     snap["models"].to_pandas()["display_name"], strict=True))
    units["judge"] = [judge_label(k, m) for k, m in zip(units["judge_kind"],
                                                         units["judge_model"], strict=True)]
    by = units.groupby(["judge", "model"])
    expected = pd.DataFrame({"n": by.size(), "within_sd": np.sqrt(by["var"].mean()),
                             "changed_pct": 100 * by["spread"].agg(lambda v: (v > 0).mean()),
                             "repeats": by["size"].max()}).reset_index()
    expected["model"] = expected["model"].map(names)
    key = ["judge", "model"]
    got = frame.sort_values(key).reset_index(drop=True)
    expected = expected.sort_values(key).reset_index(drop=True)
    assert len(got) == len(expected) > 10 and expected["judge"].str.startswith("pairwise").any()
    assert got["n"].tolist() == expected["n"].tolist()
    assert got[key].values.tolist() == expected[key].values.tolist()
    assert got["repeats"].tolist() == expected["repeats"].tolist()
    np.testing.assert_allclose(got["within_sd"], expected["within_sd"], rtol=1e-12)
    np.testing.assert_allclose(got["changed_pct"], expected["changed_pct"], rtol=1e-12)
