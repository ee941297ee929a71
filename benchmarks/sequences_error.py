"""Wrong verdicts when a gate is looked at after every answer: the betting
confidence sequence against naive peeking with a fixed-sample Wilson interval.

Design (crossed, as real studies are): each simulated study draws a panel of
``--raters`` clinicians with leniencies ``v_r ~ N(0, 0.5)``; every answer of a
cell is rated by ``--per-answer`` distinct raters of the panel drawn at random;
rating ``j`` of answer ``i`` fails when ``a + u_i + v_r + e_ij > 0`` with answer
effects ``u ~ N(0, 0.6)`` and noise ``e ~ N(0, 0.6)``. The per-answer value is
the share of its raters that fail it (``mean``) or whether any does (``any``,
the study default). The cell's *true rate* is the expected per-answer value
over the population of answers **and raters**, computed exactly (``mean``:
``Phi(a / sd)``; ``any``: Gauss-Hermite quadrature over ``u``); ``a`` is
solved so that it equals the planted rate. Cells are planted near the 10 %
gate (8 %, 10 %, 11 %, 13 %) and far from it (2 %, 5 %, 25 %).

Each cell's stream of answers is looked at after every answer up to
``--max-answers``; the study stops the cell at the first look whose interval
clears the gate (pass: upper <= 10 %, fail: lower > 10 %). Printed per cell:
how often the stopped verdict is wrong against the population rate, how often
against the panel's own rate (``mean`` rule; what the stream's answers are
i.i.d. draws of), the share settled and the median answers to settle, for the
betting CS (``clinieval.stats.sequences``, alpha = 0.05) and for naive
peeking at a 95 % Wilson interval of the per-answer values.

    python benchmarks/sequences_error.py [--studies 400] [--raters 60] [--rule any]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from clinieval.stats.proportions import wilson_ci
from clinieval.stats.sequences import FAIL, OPEN, PASS, crossing_times, first_settled, rater_margin

ANSWER_SD, RATER_SD, NOISE_SD = 0.6, 0.5, 0.6
RATES = (0.02, 0.05, 0.08, 0.10, 0.11, 0.13, 0.25)
GATE = 0.10
METHODS = ("cs", "cs+raters", "wilson")
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


def population_rate(a: float, rule: str, per_answer: int) -> float:
    """Expected per-answer value over answers and the rater population."""
    if rule == "mean":
        return float(norm.cdf(a / np.sqrt(ANSWER_SD**2 + RATER_SD**2 + NOISE_SD**2)))
    # Given the answer effect u, each of k raters from the population fails
    # it independently with q(u) = Phi((a + u) / sqrt(rater^2 + noise^2)).
    q = norm.cdf((a + ANSWER_SD * _NODES) / np.hypot(RATER_SD, NOISE_SD))
    return float(_WEIGHTS @ (1 - (1 - q) ** per_answer) / _WEIGHTS.sum())


def plant(rate: float, rule: str, per_answer: int) -> float:
    """The cell effect ``a`` whose population rate is ``rate``."""
    return brentq(lambda a: population_rate(a, rule, per_answer) - rate, -10, 10)


def panel_rate(a: float, leniency: np.ndarray) -> float:
    """The ``mean`` rule's rate over answers and this panel's raters."""
    return float(np.mean(norm.cdf((a + leniency) / np.hypot(ANSWER_SD, NOISE_SD))))


def distinct_draws(n, size, k, rng):
    """``(n, k)`` indices, each row ``k`` distinct ones drawn uniformly from
    ``range(size)``: the ``m``-th is the ``i``-th index not yet drawn."""
    chosen = np.empty((n, 0), dtype=np.int64)
    for m in range(k):
        pick = rng.integers(0, size - m, n)
        for taken in np.sort(chosen, axis=1).T:
            pick += pick >= taken
        chosen = np.column_stack([chosen, pick])
    return chosen


def answer_stream(a, leniency, n_answers, per_answer, rule, rng):
    """Per-answer values of one cell, each answer rated by distinct panel
    raters, and the ``(answers, per_answer)`` raters."""
    raters = distinct_draws(n_answers, leniency.size, per_answer, rng)
    latent = (a + rng.normal(0, ANSWER_SD, (n_answers, 1)) + leniency[raters]
              + rng.normal(0, NOISE_SD, (n_answers, per_answer)))
    fails = latent > 0
    x = fails.mean(axis=1) if rule == "mean" else fails.any(axis=1).astype(float)
    return x, raters


def with_rater_margin(x, raters, threshold=GATE, alpha=0.05, step=0.0025, cap=0.15):
    """First look at which the sequence at alpha / 2, widened by the rater
    margin at alpha / 2, clears the gate. The margin is rounded up to
    ``step`` (a little conservative) so that the running bounds are only
    needed at a few levels: the upper bound is <= L from its first crossing
    of L on. Margins above ``cap`` allow no verdict."""
    answers = np.repeat(np.arange(x.size), raters.shape[1])
    margin = np.ceil(rater_margin(answers, raters.ravel(), x, alpha / 2) / step) * step
    looks = np.arange(x.size)
    first = {PASS: x.size, FAIL: x.size}
    for level in np.unique(margin[margin <= cap]):
        at_level = (margin == level)
        for verdict, bar in ((PASS, threshold - level), (FAIL, threshold + level)):
            if not 0 < bar < 1:
                continue
            passed, failed = crossing_times(x, bar, alpha=alpha / 2)
            crossed = passed if verdict == PASS else failed
            if crossed is not None:
                hits = np.flatnonzero(at_level & (looks >= crossed))
                if hits.size:
                    first[verdict] = min(first[verdict], int(hits[0]))
    if first[PASS] == first[FAIL]:
        return OPEN, None
    verdict = PASS if first[PASS] < first[FAIL] else FAIL
    return verdict, first[verdict] + 1


def naive_wilson(x, threshold=GATE):
    """First look at which a 95 % Wilson interval of the values so far clears
    the gate: (verdict, answers) or ("open", None)."""
    n = np.arange(1, x.size + 1)
    lower, upper = wilson_ci(np.cumsum(x), n)
    passed, failed = np.flatnonzero(upper <= threshold), np.flatnonzero(lower > threshold)
    first_pass = passed[0] if passed.size else np.inf
    first_fail = failed[0] if failed.size else np.inf
    if first_pass == first_fail:
        return "open", None
    return (PASS, int(first_pass) + 1) if first_pass < first_fail else (FAIL, int(first_fail) + 1)


def wrong(verdict: str, rate: float, threshold=GATE) -> bool:
    return (verdict == PASS and rate > threshold) or (verdict == FAIL and rate <= threshold)


def simulate(studies, raters, per_answer, rule, max_answers, rng, rates=RATES):
    """Per planted rate and method: counts of wrong (population), wrong
    (panel), settled, and the answers to settle."""
    effects = [plant(r, rule, per_answer) for r in rates]
    out = {(r, m): {"wrong": 0, "wrong_panel": 0, "settled": 0, "answers": []}
           for r in rates for m in METHODS}
    for _ in range(studies):
        leniency = rng.normal(0, RATER_SD, raters)
        for rate, a in zip(rates, effects, strict=True):
            x, assigned = answer_stream(a, leniency, max_answers, per_answer, rule, rng)
            panel = panel_rate(a, leniency) if rule == "mean" else np.nan
            results = (("cs", first_settled(x, GATE)),
                       ("cs+raters", with_rater_margin(x, assigned)),
                       ("wilson", naive_wilson(x)))
            for method, result in results:
                tally = out[(rate, method)]
                verdict, n = result
                if n is None:
                    continue
                tally["settled"] += 1
                tally["answers"].append(n)
                tally["wrong"] += wrong(verdict, rate)
                tally["wrong_panel"] = None if np.isnan(panel) else (
                    tally["wrong_panel"] + wrong(verdict, panel))
    return out


def panel_column(tally, studies) -> str:
    if tally["wrong_panel"] is None:
        return "-"
    return f"{tally['wrong_panel'] / studies:.1%}"


def table(out, studies, rates=RATES) -> list[str]:
    rows = [f"{'true rate':>9} {'method':>9} {'wrong':>7} {'wrong|settled':>13} "
            f"{'wrong vs panel':>14} {'settled':>8} {'median n':>9}"]
    for rate in rates:
        for method in METHODS:
            t = out[(rate, method)]
            settled = max(t["settled"], 1)
            median = f"{np.median(t['answers']):9.0f}" if t["answers"] else f"{'-':>9}"
            rows.append(
                f"{rate:9.0%} {method:>9} {t['wrong'] / studies:7.1%} "
                f"{t['wrong'] / settled:13.1%} {panel_column(t, studies):>14} "
                f"{t['settled'] / studies:8.1%} {median}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400)
    parser.add_argument("--raters", type=int, default=60)
    parser.add_argument("--per-answer", type=int, default=3)
    parser.add_argument("--rule", choices=("mean", "any"), default="mean")
    parser.add_argument("--max-answers", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=20240)
    args = parser.parse_args()
    start = time.perf_counter()
    out = simulate(args.studies, args.raters, args.per_answer, args.rule, args.max_answers,
                   np.random.default_rng(args.seed))
    print(f"{args.studies} studies, {args.raters} raters, {args.per_answer} per answer, rule "
          f"{args.rule}, up to {args.max_answers} answers per cell, gate {GATE:.0%}, "
          f"alpha 0.05, seed {args.seed}; looks after every answer")
    print("\n".join(table(out, args.studies)))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
