"""Generate the reference cases in tests/data/stats_*.json.

Run once by hand (``python tests/data/make_stats_refs.py``); the expected
numbers come from independent libraries (choix, statsmodels, krippendorff,
scipy), never from clinieval, and the tests only read the JSON files.
"""

from __future__ import annotations

import json
from pathlib import Path

import choix
import krippendorff
import numpy as np
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.inter_rater import fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

HERE = Path(__file__).parent


def _random_votes(rng, n_models, n_votes):
    a = rng.integers(0, n_models, n_votes)
    b = (a + rng.integers(1, n_models, n_votes)) % n_models
    strength = rng.normal(0.0, 1.0, n_models)
    a_wins = rng.random(n_votes) < 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
    return a, b, a_wins


def choix_cases():
    rng = np.random.default_rng(20240601)
    cases = []
    for n_models, n_votes, alpha in [(4, 60, 1e-6), (7, 400, 1e-6), (13, 1500, 0.01)]:
        a, b, a_wins = _random_votes(rng, n_models, n_votes)
        outcome = np.where(a_wins, 0, 1)
        winners, losers = np.where(a_wins, a, b), np.where(a_wins, b, a)
        pairs = [(int(w), int(v)) for w, v in zip(winners, losers, strict=True)]
        params = choix.opt_pairwise(n_models, pairs, alpha=alpha, tol=1e-12)
        cases.append(
            {
                "n_models": n_models,
                "alpha": alpha,
                "a": a.tolist(),
                "b": b.tolist(),
                "outcome": outcome.tolist(),
                "expected": (params - params.mean()).tolist(),
            }
        )
    return {"source": "choix.opt_pairwise (Newton-CG, tol=1e-12), centred", "cases": cases}


def glm_cases():
    rng = np.random.default_rng(20240602)
    cases = []
    for n, p, fractional in [(50, 2, False), (150, 4, True)]:
        X = rng.normal(size=(n, p))
        eta = X @ rng.normal(0.0, 0.7, p)
        y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
        if fractional:
            y[rng.random(n) < 0.15] = 0.5
        w = rng.integers(1, 4, n).astype(float)
        fit = sm.GLM(y, X, family=sm.families.Binomial(), freq_weights=w).fit(tol=1e-12)
        cases.append(
            {
                "X": X.tolist(),
                "y": y.tolist(),
                "weights": w.tolist(),
                "coef": fit.params.tolist(),
                "se": fit.bse.tolist(),
            }
        )
    return {"source": "statsmodels GLM(Binomial, freq_weights)", "cases": cases}


def wilson_cases():
    k = [0, 1, 3, 7, 10, 250, 999]
    n = [10, 10, 10, 10, 10, 1000, 1000]
    cases = []
    for level in (0.95, 0.9):
        lo, hi = proportion_confint(np.array(k), np.array(n), alpha=1 - level, method="wilson")
        cases.append({"k": k, "n": n, "level": level, "lower": lo.tolist(), "upper": hi.tolist()})
    return {"source": "statsmodels proportion_confint(method='wilson')", "cases": cases}


def fleiss_cases():
    rng = np.random.default_rng(20240603)
    cases = []
    for items, raters, shares in [(20, 3, [0.5, 0.5]), (40, 6, [0.1, 0.2, 0.4, 0.2, 0.1])]:
        counts = rng.multinomial(raters, shares, size=items)
        cases.append({"counts": counts.tolist(), "kappa": float(fleiss_kappa(counts))})
    return {"source": "statsmodels.stats.inter_rater.fleiss_kappa", "cases": cases}


def krippendorff_cases():
    rng = np.random.default_rng(20240604)
    values = [-2, -1, 0, 1, 2]
    cases = []
    for raters, units, missing in [(3, 15, 0.2), (8, 60, 0.5)]:
        data = rng.choice(values, size=(raters, units)).astype(float)
        data[rng.random(data.shape) < missing] = np.nan
        alphas = {
            level: float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
            for level in ("nominal", "ordinal", "interval")
        }
        rows = [[None if np.isnan(v) else int(v) for v in row] for row in data]
        cases.append({"values": values, "reliability_data": rows, "alpha": alphas})
    return {"source": "krippendorff.alpha(reliability_data=...)", "cases": cases}


def correlation_cases():
    rng = np.random.default_rng(20240605)
    cases = []
    for n in (5, 13, 40):
        x = rng.normal(size=n)
        y = 0.5 * x + rng.normal(size=n)
        y[0] = y[1]  # a tie for the rank correlation
        pr, sr = stats.pearsonr(x, y), stats.spearmanr(x, y)
        cases.append(
            {
                "x": x.tolist(),
                "y": y.tolist(),
                "pearson": [float(pr.statistic), float(pr.pvalue)],
                "spearman": [float(sr.statistic), float(sr.pvalue)],
            }
        )
    return {"source": "scipy.stats.pearsonr / spearmanr", "cases": cases}


def main():
    outputs = {
        "stats_choix.json": choix_cases(),
        "stats_statsmodels_glm.json": glm_cases(),
        "stats_wilson.json": wilson_cases(),
        "stats_fleiss.json": fleiss_cases(),
        "stats_krippendorff.json": krippendorff_cases(),
        "stats_correlation.json": correlation_cases(),
    }
    for name, payload in outputs.items():
        (HERE / name).write_text(_dump(payload))


def _dump(payload):
    # One case per line: small diffs, still readable.
    cases = ",\n  ".join(json.dumps(case) for case in payload["cases"])
    return f'{{"source": {json.dumps(payload["source"])},\n "cases": [\n  {cases}\n ]}}\n'


if __name__ == "__main__":
    main()
