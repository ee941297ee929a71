"""Wrong verdicts and clinician answers to settle: the prediction-powered
confidence sequence (:func:`clinieval.stats.pp_sequences.pp_betting_cs`)
against the clinicians' own (:func:`clinieval.stats.sequences.betting_cs`),
both read as the decisions read them (the sequence at alpha / 2 widened by
the rater margin at alpha / 2, looked at after every answer).

Design (crossed, as ``sequences_error.py``): each simulated study draws a
panel of ``--raters`` clinicians with leniencies ``v_r ~ N(0, rater_sd)``;
each rated answer gets ``--per-answer`` distinct raters of the panel; rating
``j`` of answer ``i`` fails when ``a + u_i + v_r + e_ij > 0`` with ``u ~ N(0,
answer_sd)`` and ``e ~ N(0, noise_sd)``; the per-answer value is the share of
its raters who fail it (``mean``) or whether any does (``any``). A cell has
``--judged`` answers; clinicians rate them in a random order, up to
``--max-answers``. The cell's true rate is over answers *and* clinicians at
large (exact, by quadrature), so a verdict is wrong against it.

Judges (planted; each predicts every answer's value from what it sees,
``f = P(value | u_hat)`` under the model, so ``f`` is in [0, 1]):

- ``good``: sees ``u_hat = u + N(0, 0.2)``;
- ``biased``: sees ``u + 1 + N(0, 0.2)``: it over-calls harms (its Fail % is
  far above the clinicians'), as a harsh judge does;
- ``lenient``: sees ``u - 1.5 + N(0, 0.2)``: it under-calls them (nearly
  blind to harms);
- ``useless``: ``f`` uniform on [0, 1], independent of the answer.

Printed per planted rate and sequence: the share of all studies with a wrong
verdict, of settled verdicts that are wrong, the share settled, and the
clinician answers to settle (mean with unsettled studies counted at
``--max-answers``, and the median), with the answer-level correlation
``rho`` of each judge's ``f`` with the value.

    python benchmarks/pp_sequences_error.py [--studies 200] [--rule mean] [--rates 0.1 0.11]
        [--answer-sd 1.2 --rater-sd 0.3 --noise-sd 0.5 --per-answer 5 --raters 200]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from clinieval.stats.pp_sequences import pp_betting_cs
from clinieval.stats.sequences import FAIL, OPEN, PASS, betting_cs, decide, rater_margin

GATE, ALPHA = 0.10, 0.05
RATES = (0.05, 0.08, 0.13, 0.20)
JUDGES = {"good": (0.2, 0.0), "biased": (0.2, 1.0), "lenient": (0.2, -1.5), "useless": None}
"""Name: (noise SD, bias) of what the judge sees of the answer effect, or None (random)."""
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


@dataclass(frozen=True)
class Design:
    answer_sd: float = 1.2
    rater_sd: float = 0.3
    noise_sd: float = 0.5
    per_answer: int = 5
    raters: int = 200
    rule: str = "mean"
    judged: int = 20_000
    max_answers: int = 3000

    def value_given(self, a, u):
        """Expected per-answer value given the answer effect, raters at large."""
        q = norm.cdf((a + u) / np.hypot(self.rater_sd, self.noise_sd))
        return q if self.rule == "mean" else 1 - (1 - q) ** self.per_answer

    def population_rate(self, a: float) -> float:
        values = self.value_given(a, self.answer_sd * _NODES)
        return float(_WEIGHTS @ values / _WEIGHTS.sum())

    def plant(self, rate: float) -> float:
        """The cell effect ``a`` whose population rate is ``rate``."""
        return brentq(lambda a: self.population_rate(a) - rate, -10, 10)


@dataclass(frozen=True)
class Cell:
    """One simulated cell: the rated stream (values, raters per answer) and
    every judge's prediction of all its judged answers (rated first)."""

    y: np.ndarray
    raters: np.ndarray
    judged: dict[str, np.ndarray]


def draw_cell(design: Design, a: float, leniency: np.ndarray, rng) -> Cell:
    n, k = design.max_answers, design.per_answer
    u = rng.normal(0, design.answer_sd, design.judged)
    raters = np.argsort(rng.random((n, leniency.size)), axis=1)[:, :k]
    fails = (a + u[:n, None] + leniency[raters] + rng.normal(0, design.noise_sd, (n, k))) > 0
    y = fails.mean(axis=1) if design.rule == "mean" else fails.any(axis=1).astype(float)
    judged = {}
    for name, seen in JUDGES.items():
        if seen is None:
            judged[name] = rng.random(design.judged)
        else:
            sd, bias = seen
            judged[name] = design.value_given(a, u + bias + rng.normal(0, sd, u.size))
    return Cell(y, raters, judged)


def first_settled(lower, upper, margin, threshold=GATE) -> tuple[str, int | None]:
    """The verdict at the first look whose widened bounds clear the gate."""
    verdict = decide(np.maximum(0.0, lower - margin), np.minimum(1.0, upper + margin),
                     threshold)
    hit = np.flatnonzero(verdict != OPEN)
    return (str(verdict[hit[0]]), int(hit[0]) + 1) if hit.size else (OPEN, None)


def cell_verdicts(cell: Cell, judges=tuple(JUDGES)) -> dict[str, tuple[str, int | None]]:
    """First settled verdict of the clinicians' sequence and of each judge's."""
    half = ALPHA / 2
    answers = np.repeat(np.arange(cell.y.size), cell.raters.shape[1])
    margin = rater_margin(answers, cell.raters.ravel(), cell.y, half)
    cs = betting_cs(cell.y, half)
    out = {"clinicians": first_settled(cs.lower, cs.upper, margin)}
    n = cell.y.size
    for name in judges:
        f = cell.judged[name]
        pp = pp_betting_cs(cell.y, f[:n], f, half)
        out[name] = first_settled(pp.lower, pp.upper, margin)
    return out


def wrong(verdict: str, rate: float, threshold=GATE) -> bool:
    return (verdict == PASS and rate > threshold) or (verdict == FAIL and rate <= threshold)


def simulate(design: Design, studies: int, rng, rates=RATES, judges=tuple(JUDGES)) -> dict:
    """Per (rate, sequence): wrong, settled, answers (unsettled at the cap)
    and the judges' answer-level correlations."""
    effects = {r: design.plant(r) for r in rates}
    names = ("clinicians", *judges)
    out = {(r, m): {"wrong": 0, "settled": 0, "answers": [], "rho": []}
           for r in rates for m in names}
    for _ in range(studies):
        leniency = rng.normal(0, design.rater_sd, design.raters)
        for rate in rates:
            cell = draw_cell(design, effects[rate], leniency, rng)
            for method, (verdict, n) in cell_verdicts(cell, judges).items():
                tally = out[(rate, method)]
                tally["answers"].append(n if n is not None else design.max_answers)
                if method != "clinicians":
                    f = cell.judged[method][:cell.y.size]
                    tally["rho"].append(float(np.corrcoef(cell.y, f)[0, 1]))
                if n is None:
                    continue
                tally["settled"] += 1
                tally["wrong"] += wrong(verdict, rate)
    return out


def table(out, studies, rates=RATES, judges=tuple(JUDGES)) -> list[str]:
    rows = [f"{'rate':>5} {'sequence':>10} {'rho':>5} {'wrong':>6} {'wrong|settled':>13} "
            f"{'settled':>8} {'mean n':>7} {'median n':>8} {'n / clinicians':>14}"]
    for rate in rates:
        base = np.mean(out[(rate, "clinicians")]["answers"])
        for method in ("clinicians", *judges):
            t = out[(rate, method)]
            rho = f"{np.mean(t['rho']):5.2f}" if t["rho"] else f"{'-':>5}"
            mean = np.mean(t["answers"])
            rows.append(f"{rate:5.0%} {method:>10} {rho} {t['wrong'] / studies:6.1%} "
                        f"{t['wrong'] / max(t['settled'], 1):13.1%} "
                        f"{t['settled'] / studies:8.1%} {mean:7.0f} "
                        f"{np.median(t['answers']):8.0f} {mean / base:14.2f}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=200)
    defaults = Design()
    for field in ("answer_sd", "rater_sd", "noise_sd"):
        parser.add_argument(f"--{field.replace('_', '-')}", type=float,
                            default=getattr(defaults, field))
    for field in ("per_answer", "raters", "judged", "max_answers"):
        parser.add_argument(f"--{field.replace('_', '-')}", type=int,
                            default=getattr(defaults, field))
    parser.add_argument("--rule", choices=("mean", "any"), default=defaults.rule)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    args = parser.parse_args()
    design = Design(args.answer_sd, args.rater_sd, args.noise_sd, args.per_answer, args.raters,
                    args.rule, args.judged, args.max_answers)
    start = time.perf_counter()
    rates = tuple(args.rates)
    out = simulate(design, args.studies, np.random.default_rng(args.seed), rates=rates)
    print(f"{args.studies} studies; {design}; gate {GATE:.0%}, alpha {ALPHA}, seed {args.seed};"
          " looks after every answer")
    print("\n".join(table(out, args.studies, rates)))
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
