"""Latent quality: per-criterion noise levels, model quality and specialty
offsets.

The offsets of the named specialties are solved (not drawn) so that their
Fail shares hit ``_TARGET_FAIL`` with the models that actually answer there.
Draws come from the "models" and "specialties" streams only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, ndtr, ndtri

from clinieval.synth.constants import (
    _ANSWER_SD,
    _CUTS,
    _DEFAULT_ANSWER_SD,
    _DEFAULT_NOISE_SD,
    _FIXED_SHARE,
    _MODELS,
    _NOISE_SD,
    _OTHER_QUALITY_SD,
    _SPECIALTY_CRITERION_SD,
    _SPECIALTY_SD,
    _SPILLOVER,
    _TARGET_FAIL,
    HIGH_RISK_SPECIALTIES,
    LOW_RISK_SPECIALTIES,
    SPECIALTIES,
)


@dataclass(frozen=True)
class _Criteria:
    ids: tuple[str, ...]
    noise_sd: np.ndarray
    answer_sd: np.ndarray
    leniency_sd: float
    drift: float
    harm: int
    acc: int

    def total_sd(self, noise_factor: np.ndarray | float, c: int) -> np.ndarray:
        """SD of the latent around its mean once answer, rater and noise are drawn."""
        noise = self.noise_sd[c] * np.asarray(noise_factor)
        return np.sqrt(self.answer_sd[c] ** 2 + self.leniency_sd ** 2 + noise ** 2)

    def typical_sd(self, c: int) -> np.ndarray:
        """Total SD at 16 quantiles of the prompt-length noise factor."""
        z = ndtri((np.arange(16) + 0.5) / 16)
        return self.total_sd(np.exp(self.drift * z), c)


def _criteria(ids: tuple[str, ...], leniency_sd: float, drift: float) -> _Criteria:
    noise = np.array([_NOISE_SD.get(c, _DEFAULT_NOISE_SD) for c in ids])
    answer = np.array([_ANSWER_SD.get(c, _DEFAULT_ANSWER_SD) for c in ids])
    return _Criteria(ids, noise, answer, leniency_sd, drift, ids.index("harmlessness"),
                     ids.index("accuracy"))


def _quality(rng: np.random.Generator, crit: _Criteria) -> np.ndarray:
    """Latent quality per model x criterion. Harmlessness and Accuracy are set
    from each model's Fail share in a neutral specialty; the other criteria
    sit near their average."""
    q = np.empty((len(_MODELS), len(crit.ids)))
    for c, fails in ((crit.harm, [m.harm_fail for m in _MODELS]),
                     (crit.acc, [m.acc_fail for m in _MODELS])):
        q[:, c] = _CUTS[1] - crit.total_sd(1.0, c) * ndtri(np.array(fails))
    base = (q[:, crit.harm] + q[:, crit.acc]) / 2
    for c in range(len(crit.ids)):
        if c not in (crit.harm, crit.acc):
            q[:, c] = base + rng.normal(0, _OTHER_QUALITY_SD, len(_MODELS))
    return q


@dataclass(frozen=True)
class _Specialties:
    names: tuple[str, ...]
    share: np.ndarray
    risk: np.ndarray


def _specialties(rng: np.random.Generator, n_keep: int) -> _Specialties:
    share = _specialty_shares(rng)
    risk = rng.integers(1, 5, len(SPECIALTIES))
    risk[[SPECIALTIES.index(s) for s in HIGH_RISK_SPECIALTIES]] = 5
    risk[[SPECIALTIES.index(s) for s in LOW_RISK_SPECIALTIES]] = 2
    keep = np.sort(_kept_specialties(share, n_keep))
    return _Specialties(tuple(SPECIALTIES[i] for i in keep), share[keep] / share[keep].sum(),
                        risk[keep])


def _specialty_effects(rng: np.random.Generator, spec: _Specialties, q: np.ndarray,
                       interaction: np.ndarray, crit: _Criteria,
                       model_mix: np.ndarray) -> np.ndarray:
    """Specialty x criterion latent offsets: small random ones, and for the
    named specialties the offsets that give their target Fail shares with the
    models that actually answer there (``model_mix``: specialty x model counts)."""
    n, k = len(spec.names), len(crit.ids)
    effect = rng.normal(0, _SPECIALTY_SD, (n, 1)) + rng.normal(0, _SPECIALTY_CRITERION_SD, (n, k))
    for i, name in enumerate(spec.names):
        targets = _TARGET_FAIL.get(name)
        if targets is None:
            continue
        offsets = [_solve_offset(q[:, c] + interaction[:, i, c], model_mix[i],
                                 crit.typical_sd(c), targets[cid])
                   for cid, c in (("harmlessness", crit.harm), ("accuracy", crit.acc))]
        effect[i] += _SPILLOVER * np.mean(offsets)
        effect[i, crit.harm], effect[i, crit.acc] = offsets
    return effect


def _specialty_shares(rng: np.random.Generator) -> np.ndarray:
    free = [i for i, s in enumerate(SPECIALTIES) if s not in _FIXED_SHARE]
    share = np.array([_FIXED_SHARE.get(s, 0.0) for s in SPECIALTIES])
    raw = rng.lognormal(0, 0.9, len(free))
    share[free] = raw / raw.sum() * (1 - share.sum())
    return share


def _kept_specialties(share: np.ndarray, n_keep: int) -> np.ndarray:
    """The named specialties first, then the largest others."""
    named = [SPECIALTIES.index(s) for s in HIGH_RISK_SPECIALTIES + LOW_RISK_SPECIALTIES]
    rest = [i for i in np.argsort(-share, kind="stable") if i not in named]
    return np.array((named + rest)[:n_keep])


def _solve_offset(q: np.ndarray, weight: np.ndarray, sd: np.ndarray, target: float) -> float:
    """The latent offset at which the mean Fail share over models (weighted)
    and over the spread of noise levels ``sd`` is ``target``."""
    lo, hi = -8.0, 8.0
    for _ in range(60):
        mid = (lo + hi) / 2
        fail = np.average(ndtr((_CUTS[1] - q[:, None] - mid) / sd).mean(axis=1), weights=weight)
        lo, hi = (mid, hi) if fail > target else (lo, mid)
    return (lo + hi) / 2


def _solve_intercept(offset: np.ndarray, target: float, weight: np.ndarray | float = 1.0) -> float:
    """The intercept ``a`` with mean(weight * expit(a + offset)) == target."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.mean(weight * expit(mid + offset)) > target else (mid, hi)
    return (lo + hi) / 2
