"""Prediction-powered confidence sequences: the clinicians' sequence at
lambda = 0, the capital against a direct product, the judge's mean against
the grid sequence, hand-worked lambdas, validity with a biased judge, and
(the table: ``python benchmarks/pp_sequences_error.py``) wrong verdicts and
clinician answers saved under crossed rater effects."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from clinieval.stats import pp_sequences as pps
from clinieval.stats import sequences as seq

BENCH = Path(__file__).parents[2] / "benchmarks" / "pp_sequences_error.py"


def _stream(rng, n=120, judged=600, p=0.2):
    p_answer = rng.beta(2, 2 * (1 - p) / p, judged)
    y = (rng.random(n) < p_answer[:n]).astype(float)
    return y, p_answer[:n], p_answer


@pytest.mark.parametrize("alpha, theta", [(0.05, 0.5), (0.1, 0.3), (0.01, 0.5)])
def test_lambda_zero_is_the_clinicians_betting_cs(alpha, theta):
    y, f, judged = _stream(np.random.default_rng(4))
    pp = pps.pp_betting_cs(y, f, judged, alpha, lam=0.0, theta=theta)
    cs = seq.betting_cs(y, alpha, theta=theta)
    assert np.array_equal(pp.lower, cs.lower) and np.array_equal(pp.upper, cs.upper)
    assert (pp.judge_lower, pp.judge_upper) == (0.0, 1.0)  # no alpha spent on the judge


def test_fixed_lambda_zero_path_spends_the_judges_share_only_when_lambda_moves():
    y, f, judged = _stream(np.random.default_rng(5))
    lam = np.zeros(y.size)
    lam[60:] = 0.5
    pp = pps.pp_betting_cs(y, f, judged, 0.05, lam=lam, judge_share=0.2)
    assert 0 < pp.judge_lower < pp.judge_upper < 1
    # Before lambda moves every step is the clinicians' own, at 0.8 alpha.
    cs = seq.betting_cs(y, 0.04)
    np.testing.assert_array_equal(pp.lower[:60], cs.lower[:60])
    np.testing.assert_array_equal(pp.upper[:60], cs.upper[:60])


def _direct_bounds(y, f, lam, mu_lo, mu_hi, alpha, breaks=50):
    """The grid bounds from the module's formulas, one product per candidate
    with Python loops (the bets as WSR's plug-in bets of y - lam f)."""
    r = y - lam * f
    plus, minus = seq.plugin_bets(r, alpha / 2), seq.plugin_bets(r, alpha / 2)
    lower, upper = [], []
    grid = np.arange(breaks + 1) / breaks
    for t in range(1, y.size + 1):
        kept = []
        for m in grid:
            k_plus = k_minus = 1.0
            for i in range(t):
                step_lo = y[i] - m - lam[i] * (f[i] - mu_lo)
                step_hi = y[i] - m - lam[i] * (f[i] - mu_hi)
                cap_plus = 0.5 / (m + lam[i] * (1 - mu_lo)) if m + lam[i] * (1 - mu_lo) else np.inf
                cap_minus = 0.5 / (1 - m + lam[i] * mu_hi) if 1 - m + lam[i] * mu_hi else np.inf
                k_plus *= 1 + min(plus[i], cap_plus) * step_lo
                k_minus *= 1 - min(minus[i], cap_minus) * step_hi
            if k_plus <= 2 / alpha and k_minus <= 2 / alpha:
                kept.append(m)
        lower.append(max(0, kept[0] - 1 / breaks) if kept else 0.0)
        upper.append(min(1, kept[-1] + 1 / breaks) if kept else 1.0)
    return np.maximum.accumulate(lower), np.minimum.accumulate(upper)


def test_the_capital_is_the_direct_product_of_its_factors():
    rng = np.random.default_rng(6)
    y, f, judged = _stream(rng, n=25, judged=200)
    lam = rng.uniform(0, 1, y.size)
    pp = pps.pp_betting_cs(y, f, judged, 0.1, lam=lam, breaks=50, judge_share=0.25)
    lower, upper = _direct_bounds(y, f, lam, pp.judge_lower, pp.judge_upper, 0.075)
    np.testing.assert_allclose(pp.lower, lower, atol=1e-12)
    np.testing.assert_allclose(pp.upper, upper, atol=1e-12)


def test_the_judges_mean_is_the_grid_sequence_without_its_padding():
    rng = np.random.default_rng(7)
    for n in (40, 400, 4000):
        f = rng.beta(1, 5, n)
        cs = seq.betting_cs(f, 0.01)
        low, high = pps.judge_mean_bounds(f, 0.01)
        # The grid keeps g_k, excludes g_(k-1) and reports g_(k-1): the
        # continuum edge lies in (g_(k-1), g_k].
        assert cs.lower[-1] <= low <= cs.lower[-1] + 1e-3 + 1e-6
        assert cs.upper[-1] - 1e-3 - 1e-6 <= high <= cs.upper[-1]


def test_predictable_lambda_hand_worked():
    y, f = np.array([1.0, 0, 1, 0]), np.array([1.0, 0, 0, 0])
    # lam_1 = 0; lam_2 from one pair: no spread, 0. lam_3 from (1,1), (0,0):
    # C = sum yf - Sy Sf / 2 = 1 - 1/2, V = 1 - 1/2: slope 1, shrunk by
    # 1 / (1 + 1): 0.5. lam_4 from three pairs: Sy = 2, Sf = 1, C = 1 - 2/3,
    # V = 1 - 1/3: slope 1/2, shrunk by 2 / 3: 1/3.
    np.testing.assert_allclose(pps.predictable_lambda(y, f, prior_answers=1),
                               [0, 0, 0.5, 1 / 3])
    # With N = 48 judged answers, lam_4: k = sqrt(3/48) = 1/4, Y = 2 - 4/3 = 2/3,
    # spread = sqrt((Y V - C**2) / (1 - k**2)) = sqrt((1/3) / (15/16)) = 0.5962848,
    # (C - k spread) / V = (1/3 - 0.1490712) / (2/3) = 0.2763932, times 2/3.
    lam = pps.predictable_lambda(y, f, n_judged=48, prior_answers=1)
    assert lam[3] == pytest.approx(0.2763932 * 2 / 3, abs=1e-7)


def test_a_biased_judge_keeps_the_sequence_valid():
    # i.i.d. answers: value ~ Bernoulli(p_i); the judge says p_i + 0.3
    # (clipped): far off, yet the rectifier corrects it. Misses of the
    # truth at any look, over 300 streams, stay within alpha.
    rng = np.random.default_rng(8)
    alpha, misses, widths = 0.1, 0, []
    for _ in range(300):
        p = rng.beta(2, 8, 2000)
        y = (rng.random(300) < p[:300]).astype(float)
        f = np.clip(p + 0.3, 0, 1)
        pp = pps.pp_betting_cs(y, f[:300], f, alpha)
        misses += bool(np.any((pp.lower > 0.2) | (pp.upper < 0.2)))  # E p = 2 / 10
        widths.append(pp.upper[-1] - pp.lower[-1])
    assert misses / 300 <= alpha + 2 * np.sqrt(alpha * (1 - alpha) / 300), misses
    assert np.median(widths) < 0.2


def test_the_arguments_are_checked():
    y, f, judged = _stream(np.random.default_rng(9), n=10, judged=20)
    with pytest.raises(ValueError, match="one length"):
        pps.pp_betting_cs(y, f[:5], judged)
    with pytest.raises(ValueError, match=r"lam must lie in \[0, 1\]"):
        pps.pp_betting_cs(y, f, judged, lam=1.5)
    with pytest.raises(ValueError, match="observations must lie"):
        pps.pp_betting_cs(y, f + 2, judged)


# --- crossed rater effects: the benchmark's own simulation, small --------------------

def _bench():
    spec = importlib.util.spec_from_file_location("pp_sequences_error", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return bench


@pytest.fixture(scope="module")
def crossed():
    bench = _bench()
    design = bench.Design(judged=10_000, max_answers=2500)
    studies, rates = 24, (0.05, 0.13)
    out = bench.simulate(design, studies, np.random.default_rng(2), rates=rates,
                         judges=("good", "biased", "useless"))
    return bench, out, studies, rates


def test_crossed_verdicts_of_every_judge_are_wrong_at_most_alpha(crossed):
    _, out, studies, rates = crossed
    for (rate, method), t in out.items():
        slack = 2 * np.sqrt(0.05 * 0.95 / max(t["settled"], 1))
        assert t["wrong"] / max(t["settled"], 1) <= 0.05 + slack, (rate, method, t["wrong"])


def test_a_good_judge_saves_clinician_answers_and_a_useless_one_costs_little(crossed, capsys):
    _, out, _, rates = crossed
    for rate in rates:
        clinicians = np.mean(out[(rate, "clinicians")]["answers"])
        good = np.mean(out[(rate, "good")]["answers"])
        useless = np.mean(out[(rate, "useless")]["answers"])
        with capsys.disabled():
            print(f"\n  rate {rate:.0%}: clinicians {clinicians:.0f} answers, good judge"
                  f" {good:.0f} ({good / clinicians:.2f}x), useless {useless:.0f}"
                  f" ({useless / clinicians:.2f}x)")
        # Far from the gate the clinicians settle within a few hundred
        # answers, while lambda is still finding the judge's slope; near it
        # the judge's share of the variance counts.
        assert good <= (0.95 if rate < 0.1 else 0.9) * clinicians
        assert useless <= 1.1 * clinicians
