"""Inverse-probability weighted means of a targeted study: hand-worked
weights, and a simulation with planted Fail % in which answers are chosen
by the targeted assignment's own shares and keys (cells favoured while
their estimate is near the gate), tilted within a cell towards answers a
judge is unsure of (which the platform does not do, but the weights must
survive): the weighted interval covers the planted per-model Fail %
as an evenly spread study's plain interval does, and the unweighted one
does not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from clinieval.platform.targeting import answer_shares, pick_keys
from clinieval.stats.ipw import cell_weights, weighted_answer_mean


def test_cell_weights_by_hand():
    # cell 0 (10 answers): inverses 2 and 4 of 6 -> 10*2/6, 10*4/6; cell 1 (4): 4*1/1
    w = cell_weights([0.5, 0.25, 1.0], [0, 0, 1], [10, 4])
    assert w == pytest.approx([10 / 3, 20 / 3, 4.0])
    with pytest.raises(ValueError):
        cell_weights([0.0], [0], [1])


def test_weighted_mean_by_hand():
    # answers 0, 1, 2 with values 1, 0, 1 and weights 1, 3, 1: (1 + 1) / 5 = 0.4
    got = weighted_answer_mean([1.0, 0.0, 1.0], [1.0, 3.0, 1.0], [0, 1, 1, 2], [0, 1, 2, 0],
                               rng=np.random.default_rng(0), B=200)
    assert got.estimate == pytest.approx(0.4)
    assert got.n_answers == 3 and got.n_raters == 3
    assert got.lower <= got.estimate <= got.upper


RATES = np.array([0.02, 0.08, 0.07, 0.35, 0.06, 0.30])  # 2 models x 3 specialties
SIZES = np.array([300, 500, 200, 400, 300, 250])
MODEL = np.array([0, 1, 0, 1, 0, 1])
SPECIALTY = np.array([0, 0, 1, 1, 2, 2])
ANSWER_SD, RATER_SD = 1.0, 0.3


def _study(rng):
    nodes, gw = np.polynomial.hermite_e.hermegauss(40)
    logit = [rng.normal(special.logit(r), ANSWER_SD, n) for r, n in zip(RATES, SIZES,
                                                                        strict=True)]
    # the truth: each answer's fail chance over clinicians at large, averaged over the pool
    truth_c = np.array([np.mean(special.expit(a[:, None] + RATER_SD * nodes) @ gw)
                        / np.sqrt(2 * np.pi) for a in logit])
    judge = [1 - np.abs(2 * special.expit(a + rng.normal(0, 0.7, a.size)) - 1) for a in logit]
    panel = rng.normal(0, RATER_SD, 30)
    return logit, judge, panel, truth_c


def _collect(rng, logit, judge, panel, targeted: bool, picks: int = 900):
    """``picks`` ratings (one clinician per answer), per specialty in turn;
    targeted: every 20 picks the shares are recomputed from the running
    cell estimates (a cell within 6 points of a 10 % gate is open, weight
    1 / (1 + n)), the judge tilting within cells, and the next picks walk
    the keys; each pick records its share."""
    rated = [np.zeros(n, dtype=bool) for n in SIZES]
    value = [np.zeros(n) for n in SIZES]
    prob = [np.zeros(n) for n in SIZES]
    rater = [np.zeros(n, dtype=np.int64) for n in SIZES]
    queue: dict[int, list] = {}
    for t in range(picks):
        s = t % 3
        cells = np.flatnonzero(SPECIALTY == s)
        if targeted and (t % 20 == 0 or not queue.get(s)):
            for s2 in range(3):
                cs = np.flatnonzero(SPECIALTY == s2)
                cell_of, room, u, owner = [], [], [], []
                weights = {}
                for c in cs:
                    n = rated[c].sum()
                    est = value[c][rated[c]].mean() if n else 0.1
                    weights[(c,)] = 1 / (1 + n) if abs(est - 0.1) < 0.06 or n < 20 else None
                    free = np.flatnonzero(~rated[c])
                    cell_of += [[(c,)]] * free.size
                    room += [True] * free.size
                    u.append(judge[c][free])
                    owner += [(c, i) for i in free]
                share = answer_shares(cell_of, np.array(room), weights, 0.1)
                share = _tilted(share, np.concatenate(u), [o[0] for o in owner])
                share /= share.sum()  # a draw is made for every request here
                order = np.argsort(pick_keys(share, rng))
                queue[s2] = [(owner[k], share[k]) for k in order[:60]]
        if targeted:
            while True:
                (c, i), p = queue[s].pop(0)
                if not rated[c][i]:
                    break
        else:
            free = [(c, i) for c in cells for i in np.flatnonzero(~rated[c])]
            c, i = free[rng.integers(len(free))]
            p = 1.0 / len(free)
        r = rng.integers(panel.size)
        rated[c][i], prob[c][i], rater[c][i] = True, p, r
        value[c][i] = float(rng.random() < special.expit(logit[c][i] + panel[r]))
    return rated, value, prob, rater


def _tilted(share, u, cell):
    """Within each cell, shares tilted by ``1 + u`` (the cell's total kept):
    the platform spreads a cell evenly (its decisions read the stream
    unweighted), but the weighted estimates must hold for any recorded
    probabilities, so the test favours the answers its judge is unsure of."""
    cell = np.asarray(cell)
    out = share * (1 + u)
    for c in np.unique(cell):
        mine = cell == c
        if out[mine].sum() > 0:
            out[mine] *= share[mine].sum() / out[mine].sum()
    return out


def _estimates(rated, value, prob, rater, rng, weighted: bool):
    out = []
    for m in (0, 1):
        cs = np.flatnonzero(MODEL == m)
        y, p, cell, who = [], [], [], []
        for k, c in enumerate(cs):
            y.append(value[c][rated[c]])
            p.append(prob[c][rated[c]])
            cell.append(np.full(rated[c].sum(), k))
            who.append(rater[c][rated[c]])
        y, p, cell, who = map(np.concatenate, (y, p, cell, who))
        w = cell_weights(p, cell, SIZES[cs]) if weighted else np.ones(y.size)
        out.append(weighted_answer_mean(y, w, np.arange(y.size), who, rng=rng, B=300,
                                        level=0.90))
    return out


@pytest.mark.slow
def test_targeted_weighted_covers_the_planted_fail_pct_as_even_spreading_does():
    covered = {"even": 0, "targeted weighted": 0}
    error = {"targeted weighted": [[], []], "targeted plain": [[], []]}
    studies = 40
    for seed in range(studies):
        rng = np.random.default_rng(seed)
        logit, judge, panel, truth_c = _study(rng)
        truth = [np.average(truth_c[MODEL == m], weights=SIZES[MODEL == m]) for m in (0, 1)]
        even = _estimates(*_collect(rng, logit, judge, panel, False), rng, False)
        collected = _collect(rng, logit, judge, panel, True)
        weighted = _estimates(*collected, rng, True)
        plain = _estimates(*collected, rng, False)
        for name, got in (("even", even), ("targeted weighted", weighted)):
            covered[name] += sum(g.lower <= t <= g.upper for g, t in zip(got, truth, strict=True))
        for m in (0, 1):
            error["targeted weighted"][m].append(weighted[m].estimate - truth[m])
            error["targeted plain"][m].append(plain[m].estimate - truth[m])
    rate = {k: v / (2 * studies) for k, v in covered.items()}
    # nominal 90 %; 80 intervals: a binomial SD of about 3.4 points
    assert rate["even"] >= 0.80, rate
    assert rate["targeted weighted"] >= 0.80, rate
    assert rate["targeted weighted"] >= rate["even"] - 0.10, rate
    # per model: the mean error over studies and its standard error
    bias = {k: [(np.mean(e), np.std(e) / np.sqrt(len(e))) for e in v] for k, v in error.items()}
    assert all(abs(m) < 3 * se + 0.005 for m, se in bias["targeted weighted"]), bias
    # the plain mean leans towards the cells near the gate, which targeting favoured
    assert any(abs(m) > 4 * se for m, se in bias["targeted plain"]), bias
