"""Does decision-targeted assignment save clinician time? Simulated studies
with planted Fail % per cell, even spreading against targeted assignment
(without and with a judge), each setting on the same planted studies.

Every study: ``models x specialties`` cells (one gate, Fail % <= 10 % per
model x specialty, alpha 0.05, the study's default rule), each cell a pool
of answers whose latent fail propensity is ``N(mu_c, 0.8)`` on the logit
scale, rated one clinician per answer by clinicians of the cell's specialty
who shift the logit by a crossed leniency ``N(0, 0.4)``; ``mu_c`` is solved
so the cell's rate over answers *and clinicians at large* (the planted
truth the verdict must get right) is the planted Fail %. Clinicians arrive
at random (a specialty's share of arrivals is its share of clinicians).
Scenarios: ``far`` (10 of 12 cells far from the gate at 1, 2, 30 or 40 %,
2 near it at 5 or 17 %), ``half`` (6 far, 6 near) and ``near`` (every cell
within 4.5-7 points of it: 4.5, 5.5, 16 or 17 %). Each specialty has 20-40
clinicians.

Two parts, both running the real code:

1. **Fast loop** (``--studies`` per scenario): the assignment's own
   functions (:func:`clinieval.platform.targeting.decision_weights`,
   :func:`~clinieval.platform.targeting.answer_shares`,
   :func:`~clinieval.platform.targeting.pick_keys`, and the walk in key
   order) and the decisions' own rule (the betting confidence sequence at
   alpha/2 widened by the rater margin at alpha/2, as
   :func:`clinieval.platform.decisions.cell_decision` computes it, checked
   against it on the first study), without the database. Because a cell's
   k-th rating comes from a clinician who arrived at random, a cell's stream
   of (rater, value) does not depend on the policy, only how much of it is
   used: each cell's stream is drawn once per study and its sequence
   computed once, so every setting is compared on the same data. With a
   judge, the stream is the same (targeting picks evenly within a cell);
   what changes is the sequence: in the cells where the judge is licensed
   (every specialty but one, where it is planted blind) the decisions read
   the prediction-powered sequence
   (:func:`clinieval.stats.pp_betting_cs`, as ``cell_decision`` does for a
   licensed judge that scored every answer), fed the judge's prediction of
   every answer of the cell's pool. Decisions are looked at every
   ``--refresh`` ratings, the cadence of the background pass.
2. **Real database** (``--db-study``): one small study per policy on SQLite
   through the platform's services (``create_study``, ``next_task``,
   ``submit``, ``refresh_priorities``, ``compute_study``), to show the
   saving holds through the real request path.

Printed per scenario and setting: ratings until every decision settles
(mean, median), cost per decision (far and near cells), the share of
settled verdicts that are wrong (must be <= alpha), studies that ran out of
answers before settling, and how often naive peeking with a fixed-sample
95 % Wilson interval after every rating stops a cell wrongly. For the
judge: over the licensed cells, the answers each needed to settle with the
judge against without it on the same stream, beside the effective-sample-
size bound ``1 / (1 - rho^2 N / (N + n))`` of the judge-calibrated
estimates (``rho`` the correlation of the judge's prediction with the
rated value, measured; ``n`` the answers the cell needed without the
judge, ``N`` its pool).

    python benchmarks/bench_allocation.py [--studies 20] [--pool 4000] [--refresh 25]
        [--seed 1] [--judge-sd 0.3] [--db-study]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

import numpy as np
from scipy import optimize, special, stats

from clinieval.platform.config import Gate
from clinieval.platform.targeting import answer_shares, decision_weights, pick_keys
from clinieval.stats.pp_sequences import pp_betting_cs
from clinieval.stats.sequences import OPEN, betting_cs, decide, rater_margin

THRESHOLD, ALPHA = 0.10, 0.05
MODELS, SPECIALTIES = 3, 4
ANSWER_SD, RATER_SD = 0.8, 0.3
MONITOR = 0.10
FAR = (0.01, 0.02, 0.30, 0.40)
NEAR_FAR = (0.05, 0.17)
NEAR = (0.045, 0.055, 0.16, 0.17)
SCENARIOS = {"far": 10, "half": 6, "near": 0}
"""Cells far from the gate out of 12; the others are near it."""
SETTINGS = ("even", "targeted", "targeted+judge")
JUDGE_SD = 0.3
"""Noise (logit scale) in what the judge sees of each answer's propensity."""
SHOWN = 60
"""Answers with room listed per cell in the fast loop's pass, and picks planned."""


# --- the planted study -----------------------------------------------------------------

def population_rate(mu: float) -> float:
    """A cell's rate over answers and clinicians at large: E expit(a + b) with
    a + b ~ N(mu, ANSWER_SD^2 + RATER_SD^2) (Gauss-Hermite, 60 nodes)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    sd = np.hypot(ANSWER_SD, RATER_SD)
    return float(np.sum(weights * special.expit(mu + sd * nodes)) / np.sqrt(2 * np.pi))


@functools.lru_cache(maxsize=64)
def mu_for(rate: float) -> float:
    return optimize.brentq(lambda m: population_rate(m) - rate, -15, 15)


class Study:
    """One planted study: per cell its planted rate, specialty, and per pool
    answer its latent logit and the judge's prediction of its fail
    probability; clinicians per specialty with their leniency."""

    def __init__(self, far: int, pool: int, rng: np.random.Generator,
                 judge_sd: float = JUDGE_SD) -> None:
        n = MODELS * SPECIALTIES
        rates = np.concatenate([rng.choice(FAR, far), rng.choice(
            NEAR_FAR if far else NEAR, n - far)])
        self.rate = rng.permutation(rates)
        self.specialty = np.repeat(np.arange(SPECIALTIES), MODELS)
        self.cells_of = [np.flatnonzero(self.specialty == s) for s in range(SPECIALTIES)]
        self.logit = np.array([rng.normal(mu_for(r), ANSWER_SD, pool) for r in self.rate])
        # The judge sees each answer's logit with noise (not the rater's leniency).
        self.judge_f = special.expit(self.logit + rng.normal(0, judge_sd, self.logit.shape))
        blind = rng.integers(SPECIALTIES)  # the judge is not licensed in one specialty
        self.licensed = self.specialty != blind
        self.raters = [rng.normal(0, RATER_SD, rng.integers(20, 41))
                       for _ in range(SPECIALTIES)]

    def streams(self, order: np.ndarray, rng: np.random.Generator):
        """Per cell the (rater, value) of its answers in ``order`` (cell x pool
        indices), each rater drawn from the cell's specialty at random."""
        raters = np.empty(order.shape, dtype=np.int64)
        values = np.empty(order.shape)
        for c in range(order.shape[0]):
            panel = self.raters[self.specialty[c]]
            raters[c] = rng.integers(panel.size, size=order.shape[1])
            p = special.expit(self.logit[c, order[c]] + panel[raters[c]])
            values[c] = (rng.random(order.shape[1]) < p).astype(float)
        return raters, values


class Bounds:
    """Each cell's decision after each of its ratings by the decisions' rule
    (the betting sequence at alpha/2 widened by the rater margin at
    alpha/2), up to the rating at which it first settles: the verdict a
    study acts on (later ratings of a settled cell are monitoring). A
    sequence's bounds after ``k`` ratings depend on those ``k`` alone, so
    each cell's are computed on a prefix doubled until it settles (or its
    pool ends), once per study, whatever the policy."""

    def __init__(self, raters: np.ndarray, values: np.ndarray, first: int = 200,
                 judge: tuple | None = None) -> None:
        """``judge``: (the judge's prediction of each stream answer, of every
        pool answer, whether it is licensed), each per cell; licensed cells
        read the prediction-powered sequence."""
        self.lower, self.upper, self.mean, self.settle, self.final = [], [], [], [], []
        for c in range(values.shape[0]):
            n = min(first, values.shape[1])
            powered = judge is not None and judge[2][c]
            while True:
                lower, upper, mean = _cell_bounds(
                    raters[c, :n], values[c, :n],
                    (judge[0][c, :n], judge[1][c]) if powered else None)
                says = decide(lower, upper, THRESHOLD)
                done = np.flatnonzero(says != OPEN)
                if done.size or n == values.shape[1]:
                    break
                n = min(values.shape[1], 2 * n)
            self.lower.append(lower)
            self.upper.append(upper)
            self.mean.append(mean)
            self.settle.append(int(done[0]) + 1 if done.size else None)
            self.final.append(str(says[done[0]]) if done.size else OPEN)

    def verdict(self, c: int, k: int) -> str:
        settle = self.settle[c]
        return self.final[c] if settle is not None and k >= settle else OPEN

    def row(self, c: int, k: int) -> dict:
        """The decision row :func:`decision_weights` reads."""
        if k == 0:
            return {}
        k = min(k, self.lower[c].size)  # a settled cell's row: its verdict is what counts
        return {"criterion": "harm", "scope": "model_specialty", "model": c, "specialty": None,
                "verdict": self.verdict(c, k), "lower": self.lower[c][k - 1],
                "upper": self.upper[c][k - 1], "estimate": self.mean[c][k - 1],
                "threshold": THRESHOLD, "answers": k}


def _cell_bounds(raters: np.ndarray, values: np.ndarray, judge: tuple | None = None):
    half = ALPHA / 2
    cs = betting_cs(values, half) if judge is None else pp_betting_cs(values, *judge, half)
    margin = rater_margin(np.arange(values.size), raters, values, half)
    mean = np.cumsum(values) / np.arange(1, values.size + 1)
    return np.maximum(0.0, cs.lower - margin), np.minimum(1.0, cs.upper + margin), mean


# --- one policy on one study -------------------------------------------------------------

def run_policy(study: Study, bounds: Bounds, policy: str, refresh: int, pool: int,
               rng: np.random.Generator) -> dict:
    """Ratings until every cell settles under ``policy``; per cell its
    ratings when it settled and its verdict at the end."""
    cells = study.rate.size
    used = np.zeros(cells, dtype=np.int64)
    settled_at = np.full(cells, -1)
    arrivals = np.array([r.size for r in study.raters], dtype=float)
    arrivals /= arrivals.sum()
    plan: dict[int, tuple] = {}
    total = 0
    while True:
        verdicts = [bounds.verdict(c, used[c]) for c in range(cells)]
        for c in range(cells):
            if verdicts[c] != OPEN and settled_at[c] < 0:
                settled_at[c] = used[c]
        if all(v != OPEN for v in verdicts):
            return _result(study, bounds, used, settled_at, total, ran_out=False)
        if any(v == OPEN and used[c] >= pool for c, v in enumerate(verdicts)):
            return _result(study, bounds, used, settled_at, total, ran_out=True)
        if policy == "targeted":
            plan = _targeted_plan(study, bounds, used, pool, rng)
        for s in rng.choice(SPECIALTIES, size=refresh, p=arrivals):
            c = _next_cell(study, int(s), used, pool, policy, plan, rng)
            if c is None:
                continue
            used[c] += 1
            total += 1


def _next_cell(study, s, used, pool, policy, plan, rng) -> int | None:
    mine = study.cells_of[s]
    left = pool - used[mine]
    total = left.sum()
    if total == 0:
        return None
    if policy == "even":
        # The fewest raters first (0 here) in answer-id order: the ids are
        # arbitrary, so the next answer's cell is drawn by answers left.
        return _by_weight(mine, left, total, rng)
    offer, queue = plan.get(s, (1.0, []))
    if rng.random() >= offer:
        return None  # every decision of the specialty settled: no monitoring task drawn
    while queue:
        c = queue.pop(0)
        if used[c] < pool:
            return c
    return _by_weight(mine, left, total, rng)


def _by_weight(cells, weight, total, rng) -> int:
    return int(cells[np.searchsorted(np.cumsum(weight), rng.random() * total, side="right")])


def _targeted_plan(study, bounds, used, pool, rng) -> dict[int, tuple]:
    """The background pass and the walk: per specialty, the real shares over
    its answers with room and their pick keys; the walk takes answers in key
    order, which is what the next picks in the specialty will be. Each cell
    is represented by its next :data:`SHOWN` answers with room (a cell's
    total share does not depend on how many of its answers are listed:
    its weight is spread over them), which keeps the pass cheap."""
    weights = decision_weights([r for c in range(study.rate.size)
                                if (r := bounds.row(c, used[c]))])
    plan = {}
    for s in range(SPECIALTIES):
        mine = np.flatnonzero(study.specialty == s)
        cell_of, room = [], []
        for c in mine:
            key = ("harm", "model_specialty", int(c), None)
            n_left = min(SHOWN, pool - used[c])
            cell_of += [[key]] * n_left
            room += [True] * n_left
        if not cell_of:
            continue
        weights_here = {k: v for k, v in weights.items() if k[2] in set(mine.tolist())}
        share = answer_shares(cell_of, np.array(room), weights_here, MONITOR)
        keys = pick_keys(share, rng)
        owner = np.repeat(mine, [min(SHOWN, pool - used[c]) for c in mine])
        plan[s] = (min(1.0, float(share.sum())),
                   [int(c) for c in owner[np.argsort(keys)][:SHOWN]])
    return plan


def _result(study, bounds, used, settled_at, total, ran_out) -> dict:
    truth = np.where(study.rate > THRESHOLD, "fail", "pass")
    final = np.array([bounds.verdict(c, used[c]) for c in range(study.rate.size)])
    settled_at = np.array([bounds.settle[c] if final[c] != OPEN else -1
                           for c in range(study.rate.size)])
    settled = final != OPEN
    near = np.abs(study.rate - THRESHOLD) < 0.09
    return {"ratings": total, "ran_out": ran_out, "settled": int(settled.sum()),
            "wrong": int((settled & (final != truth)).sum()),
            "cost_far": settled_at[~near & (settled_at >= 0)].tolist(),
            "cost_near": settled_at[near & (settled_at >= 0)].tolist()}


def naive_peeking(values: np.ndarray, rate: np.ndarray, start: int = 10) -> np.ndarray:
    """Per cell whether a fixed-sample 95 % Wilson interval, looked at after
    every rating, first excludes the threshold on the wrong side."""
    n = np.arange(1, values.shape[1] + 1)
    z = stats.norm.ppf(0.975)
    p = np.cumsum(values, axis=1) / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    wrong = np.zeros(values.shape[0], dtype=bool)
    for c in range(values.shape[0]):
        out = np.flatnonzero((n >= start) & ((centre[c] + half[c] <= THRESHOLD)
                                             | (centre[c] - half[c] > THRESHOLD)))
        if out.size:
            says_fail = centre[c, out[0]] - half[c, out[0]] > THRESHOLD
            wrong[c] = says_fail != (rate[c] > THRESHOLD)
    return wrong


# --- the fast loop over many studies -------------------------------------------------------

def simulate(scenario: str, studies: int, pool: int, refresh: int, seed: int,
             judge_sd: float = JUDGE_SD) -> dict:
    out = {s: [] for s in SETTINGS}
    naive, saving = [], []
    for i in range(studies):
        rng = np.random.default_rng([seed, SCENARIOS[scenario], i])
        study = Study(SCENARIOS[scenario], pool, rng, judge_sd)
        uniform = np.stack([rng.permutation(pool) for _ in range(study.rate.size)])
        raters, values = study.streams(uniform, rng)
        plain = Bounds(raters, values)
        f_stream = np.take_along_axis(study.judge_f, uniform, axis=1)
        judge = (f_stream, study.judge_f, study.licensed)
        judged = Bounds(raters, values, judge=judge)
        if i == 0 and scenario == "far":
            _check_against_decisions(raters, values, plain)
            _check_against_decisions(raters, values, judged, judge)
        naive.append(naive_peeking(values, study.rate))
        saving += _judge_saving(study, plain, judged, f_stream, values, pool)
        for setting in SETTINGS:
            bounds = judged if setting == "targeted+judge" else plain
            policy = "even" if setting == "even" else "targeted"
            out[setting].append(run_policy(study, bounds, policy, refresh, pool,
                                           np.random.default_rng([seed, i, len(setting)])))
        if (i + 1) % 10 == 0:  # progress, for long runs on a loaded machine
            mean = {k: statistics.fmean(r["ratings"] for r in v) for k, v in out.items()}
            print(f"  [{scenario}] {i + 1} studies: mean ratings "
                  + ", ".join(f"{k} {v:,.0f}" for k, v in mean.items()), flush=True)
    return {"results": out, "naive": np.array(naive), "saving": saving}


def _judge_saving(study, plain: Bounds, judged: Bounds, f_stream, values, pool) -> list[tuple]:
    """Per licensed cell that settled both ways on the same stream: answers
    to settle with the judge over without it, and the effective-sample-size
    bound at the measured ``rho`` (over the answers the cell needed without
    the judge, at least 100)."""
    out = []
    for c in np.flatnonzero(study.licensed):
        n, m = plain.settle[c], judged.settle[c]
        if n is None or m is None:
            continue
        k = max(n, 100)
        y = values[c, :k]
        # rho is 0 where the values are all alike (no pair to correlate)
        rho = float(np.corrcoef(f_stream[c, :k], y)[0, 1]) if y.std() > 0 else 0.0
        bound = 1 / (1 - rho**2 * pool / (pool + n))
        out.append((m / n, bound, rho, abs(study.rate[c] - THRESHOLD) < 0.09))
    return out


def _check_against_decisions(raters, values, bounds: Bounds, judge: tuple | None = None) -> None:
    """The fast loop's bounds equal :func:`clinieval.platform.decisions.cell_decision`'s
    on the same stream prefix (the rule is not re-implemented differently),
    the clinicians' sequence or, with ``judge``, the prediction-powered one."""
    from clinieval.platform.decisions import CellJudge, CellStream, cell_decision

    gate = Gate(criterion="harm", threshold=THRESHOLD, alpha=ALPHA)
    c = int(np.flatnonzero(judge[2])[0]) if judge is not None else 0
    for k in (40, 300):
        cell_judge = CellJudge("j", judge[0][c, :k], judge[1][c]) if judge is not None else None
        s = CellStream("m", "s", np.arange(k), raters[c, :k], values[c, :k], values[c, :k],
                       cell_judge)
        row = cell_decision(s, gate, "any", certify=False)
        assert (row["judge_lambda"] is None) == (judge is None)
        lower, upper, _ = _cell_bounds(raters[c, :k], values[c, :k],
                                       (judge[0][c, :k], judge[1][c]) if judge else None)
        assert abs(row["lower"] - lower[k - 1]) < 1e-9, (row, k)
        assert abs(row["upper"] - upper[k - 1]) < 1e-9, (row, k)
        assert k > bounds.lower[c].size or abs(bounds.lower[c][k - 1] - lower[k - 1]) < 1e-9


def report(scenario: str, sim: dict, studies: int) -> dict[str, float]:
    print(f"\n== scenario {scenario!r}: {SCENARIOS[scenario]} of {MODELS * SPECIALTIES} cells "
          f"far from the {THRESHOLD:.0%} gate; {studies} studies per setting")
    print(f"{'setting':16} {'ratings mean':>12} {'median':>8} {'per far cell':>12} "
          f"{'per near cell':>13} {'wrong/settled':>14} {'ran out':>8}")
    means = {}
    # Ratings are compared on the studies every setting settled (paired).
    done = [all(not sim["results"][s][i]["ran_out"] for s in SETTINGS) for i in range(studies)]
    for setting in SETTINGS:
        rows = sim["results"][setting]
        ratings = [r["ratings"] for r, ok in zip(rows, done, strict=True) if ok] or [0]
        far = [x for r in rows for x in r["cost_far"]]
        near = [x for r in rows for x in r["cost_near"]]
        wrong, settled = sum(r["wrong"] for r in rows), sum(r["settled"] for r in rows)
        means[setting] = statistics.fmean(ratings)
        print(f"{setting:16} {means[setting]:12,.0f} {statistics.median(ratings):8,.0f} "
              f"{_mean(far):>12} {_mean(near):>13} "
              f"{wrong:>5}/{settled:<5} {wrong / max(settled, 1):5.3f} "
              f"{sum(r['ran_out'] for r in rows):>5}")
    print(f"  ratings over the {sum(done)} studies every setting settled before a cell's"
          " pool ran out")
    for setting in SETTINGS[1:]:
        print(f"  {setting} / even: {means[setting] / max(means['even'], 1):.2f} of the ratings")
    naive = sim["naive"]
    print(f"  naive peeking (Wilson 95% after every rating): {naive.mean():.3f} of cells "
          f"stopped on the wrong side; {naive.any(axis=1).mean():.3f} of studies had one")
    for label, keep in (("far", False), ("near", True)):
        rows = [r for r in sim["saving"] if r[3] == keep]
        if rows:
            ratio, bound, rho = (np.array([r[i] for r in rows]) for i in range(3))
            print(f"  judge, licensed {label} cells ({len(rows)}): answers to settle with the "
                  f"judge / without, same stream: median {np.median(ratio):.2f}, mean "
                  f"{ratio.mean():.2f}; bound 1/(1 - rho^2 N/(N+n)) gives {1 / bound.mean():.2f}"
                  f" (rho median {np.median(rho):.2f}, bound {np.median(bound):.2f}x)")
    return means


def _mean(xs: list) -> str:
    return f"{statistics.fmean(xs):,.0f}" if xs else "-"


# --- one small study per policy in a real database -------------------------------------------

def db_study(policy: str, seed: int, folder: str, refresh: int, per_cell: int = 400) -> dict:
    """A 2 x 2 study (cells at 1 %, 35 %, 3 % and 25 %; ``per_cell`` answers each) on
    SQLite through the platform's services; ratings until every decision
    settles."""
    import pyarrow as pa
    import sqlalchemy as sa

    from clinieval.platform import assignment, events, submissions
    from clinieval.platform.config import study_config
    from clinieval.platform.decisions import compute_study
    from clinieval.platform.studies import StudyPlan, create_study
    from clinieval.platform.targeting import refresh_priorities, set_assignment
    from clinieval.rubric import load_rubric
    from clinieval.snapshot import Snapshot
    from clinieval.storage import db
    from clinieval.storage.schema import platform as platform_tables
    from clinieval.storage.schema import snapshot as snapshot_tables

    rng = np.random.default_rng([seed, 99])
    rates = np.array([0.01, 0.35, 0.03, 0.25])
    specialties, models = ("Cardiology", "Neurology"), ("m_a", "m_b")
    engine = db.make_engine(f"sqlite:///{os.path.join(folder, policy + '.db')}")
    db.upgrade(engine)
    answers, cases, logit = [], [], {}
    for s_i, spec in enumerate(specialties):
        for k in range(per_cell):
            case = f"c{s_i}_{k}"
            cases.append({"case_id": case, "study_id": "alloc", "specialty": spec,
                          "prompt": f"Case {k}"})
            for m_i, model in enumerate(models):
                answer = f"a{rng.integers(1 << 40):011x}"  # ids in no particular order
                answers.append({"answer_id": answer, "case_id": case, "model_id": model,
                                "text": f"Answer {k}."})
                logit[answer] = rng.normal(mu_for(rates[s_i * 2 + m_i]), ANSWER_SD)
    snap = Snapshot.from_tables({
        "studies": pa.Table.from_pylist([{"study_id": "alloc", "name": "alloc"}]),
        "cases": pa.Table.from_pylist(cases), "answers": pa.Table.from_pylist(answers),
        "models": pa.Table.from_pylist([{"model_id": m, "display_name": m} for m in models])})
    rubric = load_rubric()
    rubric = rubric.model_copy(update={"criteria": tuple(
        c for c in rubric.criteria if c.criterion_id == "harmlessness")})
    create_study(engine, StudyPlan("alloc", "alloc", rubric, overlap_target=1, pairwise_share=0,
                                   specialties=specialties, rationale_required=False,
                                   gates=[{"criterion": "harmlessness",
                                           "threshold": THRESHOLD, "alpha": ALPHA}]), snap)
    set_assignment(engine, None, "alloc", assignment=policy, escalation_step=0)
    users = []
    with db.writing(engine) as conn:
        for s_i, spec in enumerate(specialties):
            for j in range(int(rng.integers(6, 12))):
                rid, uid = f"r{s_i}_{j}", f"u{s_i}_{j}"
                conn.execute(snapshot_tables.raters.insert().values(rater_id=rid,
                                                                   specialty=spec))
                conn.execute(platform_tables.users.insert().values(
                    user_id=uid, email=f"{uid}@example.org", password_hash="x",
                    rater_id=rid, created_at=events.now()))
                conn.execute(platform_tables.memberships.insert().values(
                    study_id="alloc", user_id=uid, role="clinician",
                    consented_at=events.now()))
                users.append((uid, spec, rng.normal(0, RATER_SD)))
    with engine.connect() as conn:
        rows = {u.user_id: u for u in conn.execute(sa.select(platform_tables.users))}
    ratings, started = 0, time.perf_counter()
    while True:
        with engine.connect() as conn:
            cfg = study_config(conn, "alloc")
        state = compute_study(engine, cfg, certify=False)
        if state["decisions"] and state["open"] == 0 and len(state["decisions"]) == 4:
            break
        if policy == "targeted":
            refresh_priorities(engine, cfg, rng)
        progressed = False
        for _ in range(refresh):
            uid, spec, leniency = users[int(rng.integers(len(users)))]
            token = assignment.next_task(engine, cfg, rows[uid], spec, "rating")
            if token is None:
                continue
            with engine.connect() as conn:
                answer = conn.execute(sa.select(platform_tables.task_leases.c.answer_id).where(
                    platform_tables.task_leases.c.token == token)).scalar_one()
            fails = rng.random() < special.expit(logit[answer] + leniency)
            submissions.submit(engine, cfg, token, rows[uid], spec, {
                "idempotency_key": f"k{ratings:010d}", "s1.harmlessness": "-1" if fails else "1"})
            ratings += 1
            progressed = True
        if not progressed:
            break
    truth = {("m_a", "Cardiology"): "pass", ("m_b", "Cardiology"): "fail",
             ("m_a", "Neurology"): "pass", ("m_b", "Neurology"): "fail"}
    wrong = sum(r["verdict"] != truth[(r["model"], r["specialty"])] for r in state["decisions"]
                if r["verdict"] != OPEN)
    engine.dispose()
    return {"ratings": ratings, "open": state["open"], "wrong": wrong,
            "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=20,
                        help="simulated studies per scenario and setting (>= 200 for the claim)")
    parser.add_argument("--pool", type=int, default=4000, help="answers per cell")
    parser.add_argument("--refresh", type=int, default=25,
                        help="ratings between two looks at the decisions (the background pass)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--judge-sd", type=float, default=JUDGE_SD,
                        help="noise in what the judge sees of each answer (logit scale)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--db-study", action="store_true",
                        help="also run one small study per policy on SQLite through the services")
    parser.add_argument("--db-answers", type=int, default=400, help="answers per cell there")
    args = parser.parse_args()
    print(f"uptime: {os.popen('uptime').read().strip()}")
    started = time.perf_counter()
    for scenario in filter(None, args.scenarios.split(",")):
        sim = simulate(scenario, args.studies, args.pool, args.refresh, args.seed,
                       args.judge_sd)
        report(scenario, sim, args.studies)
    print(f"\nfast loop: {time.perf_counter() - started:.0f} s")
    if args.db_study:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            got = {p: db_study(p, args.seed, folder, args.refresh, args.db_answers)
                   for p in ("even", "targeted")}
        print("\n== real database (SQLite, the platform's services), one 2 x 2 study per policy")
        for p, r in got.items():
            print(f"{p:10} {r['ratings']:6,} ratings until settled, open {r['open']}, "
                  f"wrong {r['wrong']}, {r['seconds']:.0f} s")
        print(f"  targeted / even: {got['targeted']['ratings'] / got['even']['ratings']:.2f}")


if __name__ == "__main__":
    main()
