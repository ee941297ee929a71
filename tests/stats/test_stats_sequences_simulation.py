"""Wrong verdicts under crossed rater effects, looking after every answer
(the full table: ``python benchmarks/sequences_error.py``).

The truth is each cell's rate over the population of answers and raters.
Given the study's panel of raters the answers are i.i.d. with mean the
panel's rate, so the plain sequence is valid for that; against the
population rate a cell near the gate needs the rater margin too
(:func:`clinieval.stats.sequences.rater_margin`).
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).parents[2] / "benchmarks" / "sequences_error.py"


def _bench():
    spec = importlib.util.spec_from_file_location("sequences_error", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_distinct_draws_are_distinct_and_uniform():
    bench = _bench()
    draws = bench.distinct_draws(10_000, 5, 3, np.random.default_rng(3))
    assert np.all(np.sort(draws, axis=1)[:, 1:] != np.sort(draws, axis=1)[:, :-1])
    counts = np.bincount(draws.ravel(), minlength=5) / draws.size
    np.testing.assert_allclose(counts, 0.2, atol=0.01)
    triples = np.unique(np.sort(draws, axis=1), axis=0, return_counts=True)[1]
    assert triples.size == 10 and triples.min() > 0.08 * 10_000  # C(5, 3) = 10 sets


def test_planted_rates_are_the_population_rates():
    bench = _bench()
    rng = np.random.default_rng(0)
    for rule in ("mean", "any"):
        a = bench.plant(0.1, rule, 3)
        leniency = rng.normal(0, bench.RATER_SD, 20_000)  # a panel as large as the population
        x, _ = bench.answer_stream(a, leniency, 40_000, 3, rule, rng)
        assert x.mean() == pytest.approx(0.1, abs=0.004), rule


def test_crossed_verdicts_fast():
    bench = _bench()
    studies = 25
    out = bench.simulate(studies, 40, 3, "mean", 1500, np.random.default_rng(1),
                         rates=(0.03, 0.16))
    for rate in (0.03, 0.16):
        for method in ("cs", "cs+raters"):
            assert out[(rate, method)]["wrong"] <= 2, (rate, method, out[(rate, method)])
    assert out[(0.03, "cs")]["settled"] == studies


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["mean", "any"])
def test_crossed_verdicts_wrong_at_most_alpha(rule):
    bench = _bench()
    studies = 200
    rates = (0.08, 0.10, 0.11, 0.13)
    out = bench.simulate(studies, 60, 3, rule, 3000, np.random.default_rng(2), rates=rates)
    slack = 2 * np.sqrt(0.05 * 0.95 / studies)
    for rate in rates:
        assert out[(rate, "cs+raters")]["wrong"] / studies <= 0.05 + slack, (rate, out)
    # Naive peeking at a fixed-sample interval goes wrong far more often at the gate.
    assert out[(0.10, "wilson")]["wrong"] > 3 * max(out[(0.10, "cs+raters")]["wrong"], 1)
