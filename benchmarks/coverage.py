"""How often do the audit's 95% intervals cover the truth?

Simulates many small snapshots whose truth is known exactly: each model's
ratings are drawn from a fixed distribution over -2..+2 (truth: its mean) and
its votes from a Bradley-Terry model with fixed strengths (truth: the
centred log-strengths). Each snapshot goes through the whole audit; the
script counts how often the reported intervals contain the truth.

    python benchmarks/coverage.py [--snapshots 200] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit

from clinieval.audit import audit
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.stats import wilson_ci
from clinieval.testing import snapshot_from_rows

MODELS = 5
PROBS = np.array([[0.05, 0.10, 0.25, 0.35, 0.25], [0.10, 0.15, 0.30, 0.30, 0.15],
                  [0.02, 0.08, 0.20, 0.40, 0.30], [0.20, 0.20, 0.20, 0.20, 0.20],
                  [0.01, 0.04, 0.15, 0.40, 0.40]])
TRUE_MEAN = PROBS @ np.arange(-2, 3)
STRENGTH = np.array([0.6, -0.2, 0.3, -0.5, -0.2])
STRENGTH = STRENGTH - STRENGTH.mean()


def simulate(rng: np.random.Generator, cases: int, votes: int):
    answers, ratings, prefs = [], [], []
    for c in range(cases):
        for m in range(MODELS):
            answer = f"a{c}-{m}"
            answers.append({"answer_id": answer, "case_id": f"c{c}", "model_id": f"m{m}"})
            ratings.append({"rating_id": len(ratings), "answer_id": answer, "rater_id": "r0",
                            "criterion_id": "harmlessness", "revision": 0,
                            "score": int(rng.choice(5, p=PROBS[m]) - 2)})
    for v in range(votes):
        c = int(rng.integers(cases))
        a, b = rng.choice(MODELS, 2, replace=False)
        won = rng.random() < expit(STRENGTH[a] - STRENGTH[b])
        prefs.append({"preference_id": v, "case_id": f"c{c}", "answer_a_id": f"a{c}-{a}",
                      "answer_b_id": f"a{c}-{b}", "choice": "A" if won else "B"})
    return snapshot_from_rows({
        "cases": [{"case_id": f"c{c}", "specialty": "General"} for c in range(cases)],
        "models": [{"model_id": f"m{m}"} for m in range(MODELS)], "answers": answers,
        "raters": [{"rater_id": "r0"}], "criteria": rubric_to_rows(load_rubric()),
        "ratings": ratings, "preferences": prefs})


def covered(table, column: str, truth: np.ndarray) -> np.ndarray:
    order = table.sort_values("model")
    return (order[f"{column}_lo"].to_numpy() <= truth) & (truth <= order[f"{column}_hi"]
                                                            .to_numpy())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--snapshots", type=int, default=200)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--votes", type=int, default=600)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    hits = {"rubric mean": [], "Bradley-Terry strength": []}
    start = time.perf_counter()
    for i in range(args.snapshots):
        result = audit(simulate(rng, args.cases, args.votes), bootstrap=args.bootstrap, seed=i)
        summary = result["model_summary"].tables["by_criterion"]
        hits["rubric mean"].extend(covered(summary, "mean", TRUE_MEAN))
        hits["Bradley-Terry strength"].extend(
            covered(result["bradley_terry"].tables["strengths"], "bt", STRENGTH))
    print(f"{args.snapshots} snapshots x {MODELS} models, {args.cases} ratings and"
          f" {args.votes} votes per snapshot, B = {args.bootstrap}"
          f" ({time.perf_counter() - start:.0f} s)")
    for name, values in hits.items():
        k, n = int(np.sum(values)), len(values)
        lo, hi = wilson_ci(k, n)
        print(f"{name:<24} coverage of nominal 95%: {100 * k / n:5.1f}%"
              f" [{100 * lo:.1f}, {100 * hi:.1f}] over {n} intervals")


if __name__ == "__main__":
    main()
