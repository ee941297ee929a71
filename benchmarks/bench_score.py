"""Scoring at MedHELM x CSEDB scale: paired bootstrap comparisons with Holm
and exact Worst@k, against the straightforward method, in one run.

Data: 35 benchmarks x 9 models x 1,000 cases x 5 samples of scores in [0, 1].
Ours: one resample of the cases per replicate shared by every model pair
(counts times a score matrix), and Worst@k from order statistics.
Straightforward: a Python loop over replicates per model pair, and Worst@k
estimated by sampling k-subsets. The baseline runs on ``--baseline-benchmarks``
benchmarks and is scaled to all 35 (printed as such).

    python benchmarks/bench_score.py [--bootstrap 10000] [--baseline-benchmarks 1]
"""

from __future__ import annotations

import argparse
import time
from itertools import combinations

import numpy as np

from clinieval.stats.scoring import holm_adjust, paired_comparisons, worst_at_k

N_BENCH, N_MODELS, N_CASES, N_SAMPLES = 35, 9, 1000, 5
SUBSETS_PER_K = 200  # the baseline's k-subset draws per case and k


def make_scores(rng: np.random.Generator) -> np.ndarray:
    """(benchmarks, models, cases, samples) scores with model and case effects."""
    model = rng.normal(0, 0.4, (1, N_MODELS, 1, 1))
    case = rng.normal(0, 1.0, (N_BENCH, 1, N_CASES, 1))
    noise = rng.normal(0, 0.7, (N_BENCH, N_MODELS, N_CASES, N_SAMPLES))
    return 1 / (1 + np.exp(-(model + case + noise)))


def ours(scores: np.ndarray, B: int, rng: np.random.Generator):
    out = []
    for bench in scores:
        case_means = bench.mean(axis=2).T  # (cases, models)
        worst = worst_at_k(bench.reshape(-1, N_SAMPLES))
        out.append((paired_comparisons(case_means, B, rng), worst))
    return out


def straightforward(scores: np.ndarray, B: int, rng: np.random.Generator):
    out = []
    for bench in scores:
        case_means = bench.mean(axis=2)  # (models, cases)
        p_values = []
        for a, b in combinations(range(N_MODELS), 2):
            diff = case_means[a] - case_means[b]
            observed = diff.mean()
            reps = np.empty(B)
            for r in range(B):
                reps[r] = diff[rng.integers(0, N_CASES, N_CASES)].mean()
            p_values.append(np.mean(np.abs(reps - observed) >= abs(observed)))
        worst = np.empty((N_MODELS * N_CASES, N_SAMPLES))
        for row, samples in enumerate(bench.reshape(-1, N_SAMPLES)):
            for k in range(1, N_SAMPLES + 1):
                picks = [rng.choice(samples, k, replace=False).min() for _ in range(SUBSETS_PER_K)]
                worst[row, k - 1] = np.mean(picks)
        out.append((holm_adjust(p_values), worst))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, default=10_000)
    parser.add_argument("--baseline-benchmarks", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    scores = make_scores(np.random.default_rng(args.seed))
    start = time.perf_counter()
    result = ours(scores, args.bootstrap, np.random.default_rng(args.seed))
    t_ours = time.perf_counter() - start
    n_base = max(1, min(args.baseline_benchmarks, N_BENCH))
    start = time.perf_counter()
    straightforward(scores[:n_base], args.bootstrap, np.random.default_rng(args.seed))
    t_base = (time.perf_counter() - start) * N_BENCH / n_base
    pairs = len(result[0][0])
    print(f"{N_BENCH} benchmarks x {N_MODELS} models x {N_CASES} cases x {N_SAMPLES} samples; "
          f"B = {args.bootstrap:,}; {pairs} model pairs per benchmark with Holm; Worst@k, k = 1..5")
    print(f"ours:            {t_ours:8.2f} s (all {N_BENCH} benchmarks)")
    print(f"straightforward: {t_base:8.2f} s (measured on {n_base} benchmark(s), "
          f"scaled x{N_BENCH / n_base:g}; Worst@k from {SUBSETS_PER_K} subset draws per k)")
    print(f"ratio:           {t_base / t_ours:8.1f}x")


if __name__ == "__main__":
    main()
