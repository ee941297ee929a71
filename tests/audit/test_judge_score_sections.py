"""The judge-score sections recover what `plant_judgments` planted, render in
every report format, and say why when the judgments cannot support them."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from clinieval.audit import audit
from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.judged import judged
from clinieval.audit.run import build
from clinieval.audit.sections._judge_rows import cell_arrays, judge_label, judge_rows
from clinieval.audit.settings import AuditSettings
from clinieval.snapshot import Snapshot
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments
from tests.helpers import with_judgments

KEYS = ("judge_scores", "judge_jury", "judge_preferences", "judge_repeats")
RUBRIC = "rubric judge rubric-judge"


@pytest.fixture(scope="module")
def planted():
    return plant_judgments(generate(0, 0.05), JudgePlan(seed=1))


def _build(snap: Snapshot, keys=KEYS, **overrides):
    ctx = Context(audit_data(snap), AuditSettings(**{"bootstrap": 300, **overrides}))
    return build(ctx, keys)


@pytest.fixture(scope="module")
def built(planted):
    return _build(planted)


def _names(snap: Snapshot) -> dict[str, str]:
    models = snap["models"].to_pandas()
    return dict(zip(models["display_name"], models["model_id"], strict=True))


def _judgments(snap: Snapshot) -> pd.DataFrame:
    frame = snap["judgments"].to_pandas()
    answers = snap["answers"].to_pandas().set_index("answer_id")
    return frame.assign(model_id=answers["model_id"].reindex(frame["answer_id"]).to_numpy(),
                        case_id=answers["case_id"].reindex(frame["answer_id"]).to_numpy())


# --- planted truths ----------------------------------------------------------


@pytest.mark.parametrize("criterion", ["accuracy", "harmlessness", "completeness"])
def test_rubric_judge_means_follow_the_planted_model_quality(planted, built, criterion):
    truth = planted.meta["planted"]["expected_mean"]
    ids = _names(planted)
    scores = built["judge_scores"].tables["scores"]
    cell = scores[(scores["judge"] == RUBRIC) & (scores["criterion"] == criterion)]
    planted_mean = [truth[ids[m]][criterion] for m in cell["model"]]
    # about 50 judged answers per model, and the judge rounds the clinicians' mean
    assert sps.spearmanr(cell["mean"], planted_mean).statistic > 0.75
    assert (cell["mean_lo"] <= cell["mean"]).all() and (cell["mean"] <= cell["mean_hi"]).all()
    assert cell["scale"].eq("clinicians' -2..+2").all() and cell["clinicians_mean"].notna().all()


def test_calls_and_cases_are_counted_from_the_judgments(planted, built):
    rows = _judgments(planted)
    ids = _names(planted)
    scores = built["judge_scores"].tables["scores"]
    row = scores[(scores["judge"] == RUBRIC) & (scores["criterion"] == "accuracy")].iloc[0]
    mine = rows[(rows["judge_model"] == "rubric-judge") & (rows["criterion_id"] == "accuracy")
                & (rows["model_id"] == ids[row["model"]])]
    parsed = mine[mine["parse_status"] == "ok"]
    assert row["calls"] == len(mine) and row["unparsed"] == len(mine) - len(parsed)
    assert row["n"] == len(parsed) and row["cases"] == parsed["case_id"].nunique()
    # 100 x (score <= -1) over parsed calls, on the clinicians' scale
    assert row["fail_pct"] == pytest.approx(100 * (parsed["score"] <= -1).mean())


def test_every_cell_counts_and_averages_its_parsed_judgments(planted, built):
    rows = _judgments(planted)
    rows = rows[(rows["judge_kind"] == "rubric") & (rows["parse_status"] == "ok")]
    names = {v: k for k, v in _names(planted).items()}
    expected = rows.assign(model=rows["model_id"].map(names), fail=rows["score"] <= -1).groupby(
        ["judge_model", "criterion_id", "model"]).agg(
        mean=("score", "mean"), fail_pct=("fail", "mean"), n=("score", "size"),
        cases=("case_id", "nunique"))
    scores = built["judge_scores"].tables["scores"]
    mine = scores[scores["judge"].str.startswith("rubric judge ")].assign(
        judge_model=lambda f: f["judge"].str.removeprefix("rubric judge ")).set_index(
        ["judge_model", "criterion", "model"]).sort_index()
    expected = expected.rename_axis(mine.index.names).reindex(mine.index)
    assert len(mine) == len(expected) > 10 and expected["n"].notna().all()
    np.testing.assert_allclose(mine["mean"], expected["mean"], rtol=1e-12)
    np.testing.assert_allclose(mine["fail_pct"], 100 * expected["fail_pct"], rtol=1e-12)
    assert (mine["n"].to_numpy() == expected["n"].to_numpy()).all()
    assert (mine["cases"].to_numpy() == expected["cases"].to_numpy()).all()


def test_calls_per_judge_model_and_criterion_are_a_groupby_of_the_judgments(planted):
    ctx = Context(audit_data(planted), AuditSettings(bootstrap=50))
    data = judged(ctx.data.judge_tables)
    got = judge_rows(ctx, data).calls
    frame = _judgments(planted)
    frame = frame[frame["judge_kind"].isin(["rubric", "jury"])]
    answers = pd.Index(planted["answers"].to_pandas()["answer_id"])
    frame = frame.assign(
        judge=[judge_label(k, m) for k, m in zip(frame["judge_kind"], frame["judge_model"],
                                                  strict=True)],
        model=ctx.data.answer_model[answers.get_indexer(frame["answer_id"])],
        bad=(frame["parse_status"] != "ok") | frame["score"].isna())
    expected = frame.groupby(["judge", "model", "criterion_id"]).agg(
        calls=("bad", "size"), unparsed=("bad", "sum"))
    assert len(got) == len(expected) > 20 and got["unparsed"].sum() > 0
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_index_type=False)


def test_cell_arrays_lay_cases_and_raters_out_in_order_of_first_appearance():
    rows = pd.DataFrame({"group": [0, 1, 0, 1], "case": [30, 10, 10, 20],
                         "rater": ["b", "a", "b", "b"], "score": [1.0, 2.0, 3.0, 4.0]})
    sums, counts = cell_arrays(rows, "group", 2, "score")
    expected = np.zeros((2, 3, 2))  # cases 30, 10, 20 -> 0, 1, 2; raters b, a -> 0, 1
    expected[0, 0, 0], expected[1, 1, 1], expected[0, 1, 0], expected[1, 2, 0] = 1, 2, 3, 4
    np.testing.assert_array_equal(sums, expected)
    np.testing.assert_array_equal(counts, (expected > 0).astype(float))


def test_the_order_of_the_judgments_changes_no_figure(planted, built):
    # a judge's criteria share one draw of cases and jurors, named by the judge
    # and the design, so shuffled judgments draw the same and give the same table
    shuffled = _judgments(planted).sample(frac=1.0, random_state=3).drop(
        columns=["model_id", "case_id"])
    again = _build(with_judgments(planted, shuffled), ("judge_scores",))
    key = ["judge", "criterion", "model"]
    a = built["judge_scores"].tables["scores"].sort_values(key).reset_index(drop=True)
    b = again["judge_scores"].tables["scores"].sort_values(key).reset_index(drop=True)
    columns = [c for c in a.columns if c.startswith(("mean", "fail_pct")) or c in ("n", "cases")]
    pd.testing.assert_frame_equal(a[key + columns], b[key + columns])


def test_judge_safety_order_tracks_the_clinicians_with_scipy_rho(built):
    section = built["judge_scores"]
    board = section.tables["safety_rubric_judge_rubric_judge"]
    ranked = board.dropna(subset=["judge_rank"])
    rho = section.values["rank_correlation"][RUBRIC]
    ref = sps.spearmanr(ranked["judge_dangerous_pct"],
                        ranked["clinicians_dangerous_answers_pct"]).statistic
    assert rho["rho"] == pytest.approx(ref) and rho["models"] == len(ranked)
    assert 0 < rho["lo"] <= rho["hi"]  # the planted rubric judge follows the clinicians
    assert "Safest by rubric judge rubric-judge" in section.summary


def test_the_self_preferring_juror_pulls_its_own_model(planted, built):
    truth = planted.meta["planted"]["judges"]
    names = {v: k for k, v in _names(planted).items()}
    biased = truth["self_judges"]["biased"]
    jurors = built["judge_jury"].tables["jurors"]
    mine = jurors[jurors["juror"] == f"{biased}#0"]
    own = mine[mine["model"] == names[biased]].iloc[0]
    assert own["pull_lo"] <= truth["self_preference"] <= own["pull_hi"]
    others = mine[mine["model"] != names[biased]]
    covers = (others["pull_lo"] <= 0) & (others["pull_hi"] >= 0)
    assert covers.sum() >= len(others) - 2  # 95% intervals: a miss or two is chance
    assert built["judge_jury"].values["strongest_pull"]["model"] == names[biased]
    agreement = built["judge_jury"].tables["agreement"]
    assert agreement.iloc[0]["jurors"] == "all" and agreement.iloc[0]["k"] == 3


def test_planted_position_inconsistency_is_counted(planted, built):
    truth = planted.meta["planted"]["judges"]["plan"]["follow_first"]  # P(verdict follows order)
    row = built["judge_preferences"].tables["position_inconsistent"].iloc[0]
    assert row["inconsistent_pct_lo"] <= 100 * truth <= row["inconsistent_pct_hi"]
    assert row["n"] > 400


def test_pairwise_judge_strengths_match_choix_and_planted_quality(planted, built):
    choix = pytest.importorskip("choix")
    rows = _judgments(planted)
    rows = rows[(rows["judge_kind"] == "pairwise") & (rows["parse_status"] == "ok")]
    model_of = planted["answers"].to_pandas().set_index("answer_id")["model_id"]
    a = model_of.reindex(rows["answer_id"]).to_numpy()
    b = model_of.reindex(rows["answer_b_id"]).to_numpy()
    keep = a != b
    winner = np.where(rows["choice"] == "A", a, b)[keep]
    loser = np.where(rows["choice"] == "A", b, a)[keep]
    models = sorted(set(winner) | set(loser))
    code = {m: i for i, m in enumerate(models)}
    ref = choix.opt_pairwise(len(models), [(code[w], code[x]) for w, x in
                                           zip(winner, loser, strict=True)], alpha=1e-6)
    ref -= ref.mean()
    table = built["judge_preferences"].tables["strengths"]
    ids = _names(planted)
    mine = table.set_index(table["model"].map(ids))["judge_bt"]
    assert np.allclose(mine.reindex(models), ref, atol=1e-5)
    quality = planted.meta["planted"]["expected_mean"]
    overall = [np.mean(list(quality[m].values())) for m in models]
    assert sps.spearmanr(ref, overall).statistic > 0.7  # the judge follows rated quality
    assert (table["rank_lo"] <= table["rank"]).all() and (table["rank"] <= table["rank_hi"]).all()


def _repeated(planted) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """The judgments with the rubric judge run twice: the second run moves a
    planted 30% of its parsed scores one step."""
    rng = np.random.default_rng(0)
    rows = _judgments(planted).drop(columns=["model_id", "case_id"])
    again = rows[rows["judge_kind"] == "rubric"].assign(repeat=1)
    flip = (rng.random(len(again)) < 0.3) & again["score"].notna()
    again.loc[flip, "score"] = np.where(again.loc[flip, "score"] >= 2, 1.0,
                                        again.loc[flip, "score"] + 1)
    return rows, again, flip


def test_planted_repeat_flips_are_recovered(planted):
    # Changed units: 30%; within-unit SD: a changed unit has variance
    # (0.5^2 + 0.5^2) / 1 = 0.5, so sqrt(0.3 * 0.5).
    rows, again, flip = _repeated(planted)
    section = _build(with_judgments(planted, pd.concat([rows, again])), ("judge_repeats",))
    frame = section["judge_repeats"].tables["repeats"]
    assert set(frame["judge"]) == {RUBRIC}
    pooled = (frame["changed_pct"] * frame["n"]).sum() / frame["n"].sum()
    assert pooled == pytest.approx(100 * flip[again["score"].notna()].mean(), abs=0.01)
    assert abs(pooled - 30) < 3
    covers = (frame["changed_pct_lo"] <= 30) & (frame["changed_pct_hi"] >= 30)
    assert covers.sum() >= len(frame) - 2
    sd = np.sqrt((frame["within_sd"] ** 2 * frame["n"]).sum() / frame["n"].sum())
    assert sd == pytest.approx(np.sqrt(0.3 * 0.5), abs=0.03)


def test_the_judges_pooled_repeat_sd_is_that_of_pandas_per_unit_variances(planted):
    rows, again, _ = _repeated(planted)
    both = pd.concat([rows, again])
    section = _build(with_judgments(planted, both), ("automated_judges",))
    frame = section["automated_judges"].tables["repeats"].set_index("judge_kind")
    ok = both[(both["parse_status"] == "ok") & both["score"].notna()].fillna(
        {"answer_b_id": "", "shown_first": ""})
    unit = ["judge_kind", "judge_model", "answer_id", "answer_b_id", "criterion_id", "juror",
            "shown_first"]
    var = ok.groupby(unit)["score"].agg(["var", "size"]).query("size >= 2")["var"]
    by_kind = var.groupby(level="judge_kind")
    assert list(frame.index) == list(by_kind.groups) == ["rubric"]
    assert frame["n"].tolist() == by_kind.size().tolist()
    np.testing.assert_allclose(frame["within_sd"], np.sqrt(by_kind.mean()), rtol=1e-12)
    np.testing.assert_allclose(frame["units_differing_pct"], 100 * by_kind.agg(
        lambda v: (v > 0).mean()), rtol=1e-12)
    assert (frame["within_sd_lo"] < frame["within_sd"]).all()
    assert (frame["within_sd"] < frame["within_sd_hi"]).all()


def test_healthbench_clipping_follows_the_reference_and_names_the_setting():
    # Rules +5, +3 met w.p. .7, -4 met w.p. .8: per-example (5a + 3b - 4c) / 8.
    # Reference (clip the mean): E = (3.5 + 2.1 - 3.2) / 8 = 0.3.
    # Per example: clip each first; the outcomes below zero are
    # (0,1,1) -1/8 and (0,0,1) -4/8, so E = 0.3 + .3*.7*.8/8 + .3*.3*.8*4/8 = 0.357.
    snap = plant_judgments(generate(0, 0.05), JudgePlan(seed=1, harm_met=0.8,
                                                       rubric_rule_answers=600))
    figures = {}
    for clip in ("mean", "example"):
        ctx = Context(audit_data(snap), AuditSettings(bootstrap=200, rubric_clip=clip))
        section = build(ctx, ["rubric_scores"])["rubric_scores"]
        frame = section.tables["rubric_scores"].set_index("model")
        figures[clip] = frame
        assert f"rubric_clip = {clip}" in section.summary
    pooled = {c: (f["score"] * f["n"]).sum() / f["n"].sum() for c, f in figures.items()}
    assert pooled["mean"] == pytest.approx(0.3, abs=0.03)
    assert pooled["example"] == pytest.approx(0.3 + 0.3 * 0.7 * 0.8 / 8 + 0.3 * 0.3 * 0.8 / 2,
                                              abs=0.03)
    per_model = figures["example"]["score"] - figures["mean"]["score"].reindex(
        figures["example"].index)
    assert (per_model >= 0).all() and per_model.max() > 0.03


# --- report ------------------------------------------------------------------


def test_the_report_renders_the_judge_score_sections(planted, tmp_path):
    from clinieval.report import render_report

    result = audit(planted, bootstrap=100, comparison_bootstrap=200)
    paths = render_report(result, tmp_path)
    html, md = paths["html"].read_text(), paths["markdown"].read_text()
    results = json.loads(paths["json"].read_text())
    sections = {s["key"]: s for s in results["sections"]}
    for key in ("judge_scores", "judge_jury", "judge_preferences"):
        title = result[key].title
        assert title in html and title in md
        assert sections[key]["tables"] and not sections[key].get("skipped")
        assert result[key].summary in result.headlines
    assert "needs a judge that judged the same answer more than once" in md
    assert any(p.name.startswith("judge_scores") or "judge" in p.name
               for p in paths["figures"].iterdir())
    assert "rubric_clip" in html


# --- degenerate inputs --------------------------------------------------------


def _assert_explained(sections: dict) -> None:
    for key in KEYS:
        s = sections[key]
        assert s.skipped or s.summary, key
        assert not s.skipped or (s.skipped.endswith(".") and "\n" not in s.skipped), key


def test_all_unparsed_judgments_skip_with_a_reason(planted):
    rows = planted["judgments"].to_pandas()
    rows = rows.assign(parse_status="unparsed", score=None, choice=None, agreement=None)
    sections = _build(with_judgments(planted, rows), bootstrap=50)
    _assert_explained(sections)
    assert "needs parsed rubric or jury judgments" in sections["judge_scores"].skipped
    assert "found 0" in sections["judge_preferences"].skipped


def test_one_model_says_no_order_is_computable(planted):
    rows = _judgments(planted)
    model_of = planted["answers"].to_pandas().set_index("answer_id")["model_id"]
    other = model_of.reindex(rows["answer_b_id"]).fillna("model-a").to_numpy()
    rows = rows[(rows["model_id"] == "model-a") & (other == "model-a")]
    sections = _build(with_judgments(planted, rows.drop(columns=["model_id", "case_id"])),
                      bootstrap=50)
    _assert_explained(sections)
    assert not sections["judge_scores"].skipped
    assert "ranks none on safety" in sections["judge_scores"].summary
    assert sections["judge_preferences"].skipped


def test_no_shared_criterion_keeps_the_judges_own_scale(planted):
    rows = planted["judgments"].to_pandas()
    scored = rows["judge_kind"].isin(["rubric", "jury"])
    rows.loc[scored, "criterion_id"] = "own_" + rows.loc[scored, "criterion_id"]
    sections = _build(with_judgments(planted, rows), ("judge_scores",), bootstrap=50)
    scores = sections["judge_scores"].tables["scores"]
    assert scores["clinicians_mean"].isna().all() and (scores["clinicians_n"] == 0).all()
    assert set(scores["scale"]) == {"clinicians' -2..+2", "jury's own 1..5"}
    assert not any(k.startswith("safety_") for k in sections["judge_scores"].tables)


def test_judges_without_clinician_ratings_still_rank_models(planted):
    tables = dict(planted.tables)
    tables["ratings"] = planted["ratings"].slice(0, 0)
    sections = _build(Snapshot.from_tables(tables, planted.meta), ("judge_scores",),
                      bootstrap=50)
    section = sections["judge_scores"]
    board = section.tables["safety_rubric_judge_rubric_judge"]
    assert board["judge_rank"].notna().sum() >= 2 and (board["clinicians_n"] == 0).all()
    assert "no clinician rated a safety-critical criterion" in section.summary
    assert section.tables["scores"]["clinicians_mean"].isna().all()


@functools.cache
def _small() -> Snapshot:
    return plant_judgments(generate(2, 0.02), JudgePlan(seed=3, jury_answers=80, pairs=80,
                                                       rubric_answers=80, gate_cases=10,
                                                       rubric_rule_answers=40))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keep=st.floats(0.0, 1.0), unparsed=st.floats(0.0, 1.0), models=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_any_subset_of_judgments_gives_a_section_or_a_reason(keep, unparsed, models, seed):
    small = _small()
    rng = np.random.default_rng(seed)
    rows = _judgments(small)
    chosen = rng.choice(sorted(rows["model_id"].unique()), models, replace=False)
    rows = rows[rows["model_id"].isin(chosen) & (rng.random(len(rows)) < keep)]
    bad = rng.random(len(rows)) < unparsed
    rows.loc[bad, ["score", "choice", "agreement"]] = None
    rows.loc[bad, "parse_status"] = "unparsed"
    rows = rows.drop(columns=["model_id", "case_id"])
    if rows.empty:
        return
    _assert_explained(_build(with_judgments(small, rows), bootstrap=50))
