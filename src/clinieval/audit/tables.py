"""Small helpers that turn estimates into report-ready DataFrame columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.stats import wilson_ci


def estimate(frame: pd.DataFrame, name: str, est, lo, hi) -> pd.DataFrame:
    """Add ``name``, ``name_lo``, ``name_hi`` columns (the report pairs them)."""
    frame[name] = np.asarray(est, dtype=float)
    frame[f"{name}_lo"] = np.asarray(lo, dtype=float)
    frame[f"{name}_hi"] = np.asarray(hi, dtype=float)
    return frame


def wilson_pct(frame: pd.DataFrame, name: str, k, n, level: float) -> pd.DataFrame:
    """A percentage with its Wilson interval, in percent (``*_pct`` columns)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    lo, hi = wilson_ci(k, n, level)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, k / n, np.nan)
    return estimate(frame, name, 100 * share, 100 * lo, 100 * hi)


def fmt_ci(est: float, lo: float, hi: float, digits: int = 2, unit: str = "") -> str:
    """'0.82 [0.77, 0.86]' for sentences."""
    return f"{est:.{digits}f}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_pct(est: float, lo: float, hi: float) -> str:
    return f"{est:.1f}% [{lo:.1f}, {hi:.1f}]"


def records(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Plain JSON-ready rows for ``values`` (NaN becomes None)."""
    out = frame[columns].astype(object).where(frame[columns].notna(), None)
    return out.to_dict(orient="records")


def row_ci(row, name: str, digits: int = 2) -> str:
    """'est [lo, hi]' of a table row's estimate columns."""
    return fmt_ci(row[name], row[f"{name}_lo"], row[f"{name}_hi"], digits)


def row_pct(row, name: str) -> str:
    return fmt_pct(row[name], row[f"{name}_lo"], row[f"{name}_hi"])
