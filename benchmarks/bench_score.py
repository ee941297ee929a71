"""Scoring at MedHELM x CSEDB scale: paired bootstrap comparisons with Holm
and exact Worst@k, against the straightforward method, in one run.

Data: 35 benchmarks x 9 models x 1,000 cases x 5 samples of scores in [0, 1].
Ours: one draw of case counts per replicate shared by every model pair and,
with each benchmark's cases in its own random order, by every benchmark of
the same size (``paired_comparisons_many``: one float32 matrix product for
all 35 x 9 columns), and Worst@k from order statistics for all cases at once.
Straightforward: a Python loop over replicates per model pair, and Worst@k
estimated by sampling k-subsets. The baseline runs on ``--baseline-benchmarks``
benchmarks and is scaled to all 35 (printed as such).

    python benchmarks/bench_score.py [--bootstrap 10000] [--baseline-benchmarks 1]
"""

from __future__ import annotations

import argparse
import os
import time
from itertools import combinations

import numpy as np

from clinieval.stats.scoring import (
    holm_adjust,
    paired_comparisons,
    paired_comparisons_many,
    worst_at_k,
)

N_BENCH, N_MODELS, N_CASES, N_SAMPLES = 35, 9, 1000, 5
SUBSETS_PER_K = 200  # the baseline's k-subset draws per case and k


def make_scores(rng: np.random.Generator) -> np.ndarray:
    """(benchmarks, models, cases, samples) scores with model and case effects."""
    model = rng.normal(0, 0.4, (1, N_MODELS, 1, 1))
    case = rng.normal(0, 1.0, (N_BENCH, 1, N_CASES, 1))
    noise = rng.normal(0, 0.7, (N_BENCH, N_MODELS, N_CASES, N_SAMPLES))
    return 1 / (1 + np.exp(-(model + case + noise)))


def ours(scores: np.ndarray, B: int, rng: np.random.Generator):
    case_means = scores.mean(axis=3).transpose(0, 2, 1)  # (benchmarks, cases, models)
    comparisons = paired_comparisons_many(list(case_means), B, rng)
    worst = worst_at_k(scores.reshape(-1, N_SAMPLES)).reshape(N_BENCH, -1, N_SAMPLES)
    return list(zip(comparisons, worst, strict=True))


def ours_per_benchmark(scores: np.ndarray, B: int, rng: np.random.Generator):
    """Ours without sharing draws across benchmarks: one draw per benchmark."""
    return [(paired_comparisons(bench.mean(axis=2).T, B, rng),
             worst_at_k(bench.reshape(-1, N_SAMPLES))) for bench in scores]


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
    load = os.getloadavg()
    scores = make_scores(np.random.default_rng(args.seed))
    wall, cpu = time.perf_counter(), time.process_time()
    result = ours(scores, args.bootstrap, np.random.default_rng(args.seed))
    t_ours, c_ours = time.perf_counter() - wall, time.process_time() - cpu
    cpu = time.process_time()
    ours_per_benchmark(scores, args.bootstrap, np.random.default_rng(args.seed))
    c_each = time.process_time() - cpu
    n_base = max(1, min(args.baseline_benchmarks, N_BENCH))
    wall, cpu = time.perf_counter(), time.process_time()
    straightforward(scores[:n_base], args.bootstrap, np.random.default_rng(args.seed))
    scale = N_BENCH / n_base
    t_base = (time.perf_counter() - wall) * scale
    c_base = (time.process_time() - cpu) * scale
    pairs = len(result[0][0])
    print(f"{N_BENCH} benchmarks x {N_MODELS} models x {N_CASES} cases x {N_SAMPLES} samples; "
          f"B = {args.bootstrap:,}; {pairs} model pairs per benchmark with Holm; Worst@k, k = 1..5")
    print(f"load average at start: {load[0]:.2f}; CPU = process time (all threads), "
          "wall = elapsed")
    print(f"ours:            {c_ours:8.2f} s CPU {t_ours:8.2f} s wall (all {N_BENCH} benchmarks)")
    print(f"ours, one draw per benchmark (float64): {c_each:.2f} s CPU")
    print(f"straightforward: {c_base:8.2f} s CPU {t_base:8.2f} s wall (measured on {n_base}"
          f" benchmark(s), scaled x{scale:g}; Worst@k from {SUBSETS_PER_K} subset draws per k)")
    print(f"ratio:           {c_base / c_ours:8.1f}x CPU {t_base / t_ours:8.1f}x wall")


if __name__ == "__main__":
    main()
