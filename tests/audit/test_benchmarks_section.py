"""The Benchmarks and cost section: win rate and macro-average against a
hand-worked table under both tie conventions, the registry's normalisation,
instance-level resampling against a plain loop, and cost split into
answering and judging against sums taken straight from the tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clinieval.audit import AuditSettings, audit
from clinieval.audit.context import Context
from clinieval.audit.run import audit_data
from clinieval.audit.sections import benchmarks as section
from clinieval.errors import InputError
from clinieval.stats import instance_replicates, macro_average, win_shares
from clinieval.stats.scoring import benchmark_summary
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
HAND = DATA / "hand_worked.jsonl"

# The hand-worked table (rows m0, m1, m2; columns exam_mcq, note_summary):
# exam_mcq is exact match on 0..1: m0 1,1,1,0 -> 0.75; m1 1,0,1,0 -> 0.5;
# m2 1,0,0,1 -> 0.5. note_summary is a jury score on 1..5, normalised
# (x - 1) / 4: m0 2,2 -> 0.25; m1 5,4 -> (1 + 0.75) / 2 = 0.875; m2 3,3 -> 0.5.
TABLE = np.array([[0.75, 0.25], [0.5, 0.875], [0.5, 0.5]])
# exam_mcq: m0 beats m1 and m2, m1 ties m2. note_summary: m1 beats both, m2 beats m0.
# Ties half:  m0 (2 + 0) / 4 = 0.5;  m1 (0.5 + 2) / 4 = 0.625;  m2 (0.5 + 1) / 4 = 0.375.
# Ties ">=":  m0 0.5;                m1 (1 + 2) / 4 = 0.75;     m2 (1 + 1) / 4 = 0.5.
WIN = {"half": [0.5, 0.625, 0.375], "geq": [0.5, 0.75, 0.5]}
# Per-benchmark win shares (half): m0 1, 0; m1 0.25, 1; m2 0.25, 0.5 -> SD (ddof 1)
# = |difference| / sqrt(2).
WIN_SD = np.array([1.0, 0.75, 0.25]) / np.sqrt(2)
MACRO = [0.5, 0.6875, 0.5]
MACRO_SD = np.array([0.5, 0.375, 0.0]) / np.sqrt(2)


@pytest.fixture(scope="module")
def data():
    return audit_data(generate(0, 0.02))


def _run(data, **settings):
    ctx = Context(data, AuditSettings(bootstrap=200, benchmark_scores=str(HAND), **settings))
    return section.compute(ctx), ctx


def test_win_shares_and_macro_average_match_the_hand_worked_table():
    for ties, expected in WIN.items():
        win, _ = win_shares(TABLE, ties)
        assert win == pytest.approx(expected, abs=1e-12)
        # the older summary function agrees
        assert benchmark_summary(TABLE, ties).win_rate == pytest.approx(expected, abs=1e-12)
    _, per_bench = win_shares(TABLE)
    assert np.std(per_bench, axis=1, ddof=1) == pytest.approx(WIN_SD, abs=1e-12)
    assert macro_average(TABLE) == pytest.approx(MACRO, abs=1e-12)
    # leading axes are replicates: a stack of the same table gives the same rows
    assert win_shares(np.stack([TABLE, TABLE]))[0][1] == pytest.approx(WIN["half"])


def test_a_missing_score_leaves_that_meeting_out():
    table = TABLE.copy()
    table[2, 1] = np.nan  # m2 has no note_summary score
    win, _ = win_shares(table)
    # m0: exam beats m1, m2 (2); notes loses to m1 (0) -> 2 / 3
    assert win[0] == pytest.approx(2 / 3)
    assert macro_average(table)[2] == pytest.approx(0.5)


@pytest.mark.parametrize("ties", ["half", "geq"])
def test_section_reproduces_the_hand_worked_table(data, ties):
    result, ctx = _run(data, win_ties=ties)
    assert result.table == pytest.approx(TABLE, abs=1e-12)
    overall = result.overall.set_index("model").loc[["m0", "m1", "m2"]]
    assert overall["win_rate"].to_numpy() == pytest.approx(WIN[ties], abs=1e-12)
    other = "geq" if ties == "half" else "half"
    assert overall[f"win_rate_if_{other}"].to_numpy() == pytest.approx(WIN[other], abs=1e-12)
    assert overall["macro_average"].to_numpy() == pytest.approx(MACRO, abs=1e-12)
    assert overall["macro_sd"].to_numpy() == pytest.approx(MACRO_SD, abs=1e-12)
    if ties == "half":
        assert overall["win_sd"].to_numpy() == pytest.approx(WIN_SD, abs=1e-12)
    assert (overall["instances"] == 6).all() and (overall["benchmarks"] == 2).all()
    assert (overall["win_rate_lo"] <= overall["win_rate"]).all()
    assert (overall["win_rate"] <= overall["win_rate_hi"]).all()
    shown = section.present(result, ctx)
    assert "win" in shown.values["settings"]["win_ties"]
    assert {f.key for f in shown.figures} >= {"benchmarks_heatmap", "benchmarks_categories",
                                              "benchmarks_cost"}


def test_registry_places_benchmarks_and_per_category_means(data):
    result, _ = _run(data)
    reg = result.registry.set_index("benchmark")
    assert reg.loc["exam_mcq", "category"] == "decision_support"
    assert reg.loc["note_summary", "metric"] == "jury"
    cats = result.categories.set_index(["category", "model"])["mean"]
    assert cats[("note_generation", "m1")] == pytest.approx(0.875)
    assert cats[("decision_support", "m0")] == pytest.approx(0.75)


def test_instance_replicates_are_the_paired_bootstrap_within_each_benchmark():
    rng = np.random.default_rng(3)
    blocks = [rng.uniform(size=(20, 3)), rng.uniform(size=(8, 3))]
    blocks[1][2, 1] = np.nan  # one unscored instance
    B = 50
    reps = instance_replicates(blocks, B, np.random.default_rng(5))
    plain_rng = np.random.default_rng(5)
    for k, block in enumerate(blocks):  # sizes differ: one draw each, in order
        shuffled = block[plain_rng.permutation(len(block))]
        picks = plain_rng.integers(0, len(block), size=(B, len(block)))
        plain = np.array([np.nanmean(shuffled[row], axis=0) for row in picks])
        assert reps[:, :, k] == pytest.approx(plain, abs=1e-5)  # float32 product


def test_cost_splits_answering_and_judging(tmp_path):
    snap = plant_judgments(generate(0, 0.02), JudgePlan(seed=1, jury_answers=100, pairs=50,
                                                        rubric_answers=50, gate_cases=20))
    models = snap["models"].column("model_id").to_pylist()[:3]
    lines = [{"model": m, "benchmark": "exam_mcq", "instance_id": f"q{i}", "score": (i + j) % 2,
              "input_tokens": 100, "output_tokens": 10} for j, m in enumerate(models)
             for i in range(6)]
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    result = audit(snap, bootstrap=100, comparison_bootstrap=100, benchmark_scores=str(path))
    names = dict(zip(snap["models"].column("model_id").to_pylist(),
                     snap["models"].column("display_name").to_pylist(), strict=True))
    cost = result["benchmarks"].tables["cost"].set_index("model").rename(
        index={v: k for k, v in names.items()})
    prices = snap["models"].to_pandas().set_index("model_id")
    answers = snap["answers"].to_pandas()
    judgments = snap["judgments"].to_pandas().merge(answers[["answer_id", "model_id"]],
                                                    on="answer_id")
    for m in models:
        # benchmark instances: 6 x (100 input + 10 output tokens) x the model's prices
        bench = 6 * (100 * prices.loc[m, "price_input_per_m"]
                     + 10 * prices.loc[m, "price_output_per_m"]) / 1e6
        own = answers[answers["model_id"] == m]
        # stored cost, else the answer's (output) tokens x the output price
        stored = own["cost_usd"].fillna(own["tokens"] * prices.loc[m, "price_output_per_m"]
                                        / 1e6).sum()
        assert cost.loc[m, "answering_usd"] == pytest.approx(bench + stored)
        judged = judgments.loc[judgments["model_id"] == m, "cost_usd"].sum()
        assert cost.loc[m, "judging_usd"] == pytest.approx(judged)
        assert cost.loc[m, "total_usd"] == pytest.approx(bench + stored + judged)
    assert result["benchmarks"].values.get("shown", True)
    assert any(line.startswith("Over 1 benchmark, ") for line in result.headlines)


def test_section_is_left_out_without_benchmark_scores(data):
    result = audit(data, bootstrap=60)
    assert result["benchmarks"].skipped and result["benchmarks"].values["shown"] is False
    assert not any("Benchmarks and cost" in line for line in result.headlines)


def test_unregistered_benchmark_must_be_on_the_unit_scale(data, tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"model": "m", "benchmark": "new_bench", "instance_id": 1,
                                "score": 7}))
    with pytest.raises(InputError, match=r"s.jsonl, row 1, field 'score'"):
        section.compute(Context(data, AuditSettings(benchmark_scores=str(path))))
    frame = pd.DataFrame({"benchmark_id": ["new_bench"], "score": [0.4]})
    from clinieval.catalogs import load_benchmarks

    assert section.normalised(frame, load_benchmarks(), "x") == pytest.approx([0.4])


def test_section_figures_draw(data):
    from clinieval.report.figures import draw, heat_scale

    result, ctx = _run(data)
    for fig in section.present(result, ctx).figures:
        assert draw(fig).axes, fig.key
    cmap, norm = heat_scale(np.array([0.2, 0.4]), "score")
    assert (norm.vmin, norm.vmax) == (0.0, 1.0)  # a score scale is always 0..1


def test_a_model_without_a_benchmark_keeps_its_meetings_and_an_interval(data, tmp_path):
    lines = [line for line in HAND.read_text().splitlines()
             if not ('"m2"' in line and "note_summary" in line)]
    path = tmp_path / "missing.jsonl"
    path.write_text("\n".join(lines))
    ctx = Context(data, AuditSettings(bootstrap=100, benchmark_scores=str(path)))
    overall = section.compute(ctx).overall.set_index("model")
    # m2 on exam_mcq only: a tie with m1 (0.5) and a loss to m0 -> 0.5 / 2
    assert overall.loc["m2", "win_rate"] == pytest.approx(0.25)
    assert overall.loc["m2", "benchmarks"] == 1 and np.isnan(overall.loc["m2", "macro_sd"])
    assert overall.loc["m2", "win_rate_lo"] <= 0.25 <= overall.loc["m2", "win_rate_hi"]


def test_cli_audit_renders_the_section_and_names_a_bad_score_file(tmp_path):
    from typer.testing import CliRunner

    from clinieval.cli import app

    runner = CliRunner()
    out = tmp_path / "report"
    result = runner.invoke(app, ["audit", "demo", "--out", str(out), "--bootstrap", "60",
                                 "--benchmark-scores", str(HAND), "--win-ties", "geq"])
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    assert 'id="benchmarks"' in html and "a tie counts a win for both models" in html
    assert (out / "figures" / "benchmarks_heatmap.svg").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model": "m", "benchmark": "b", "instance_id": 1}')
    result = runner.invoke(app, ["audit", "demo", "--out", str(tmp_path / "r2"),
                                 "--bootstrap", "60", "--benchmark-scores", str(bad)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "bad.jsonl, row 1, field 'score': required field is missing" in " ".join(
        result.output.split())
