"""Small helpers that turn estimates into report-ready DataFrame columns,
sentences (an estimate with its interval, words instead of NaN) and JSON
values (None instead of NaN)."""

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


def share_pct(frame: pd.DataFrame, name: str, k, n, lo, hi) -> pd.DataFrame:
    """The percentage k / n with a given interval of the share (lo, hi in 0..1)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, k / n, np.nan)
    return estimate(frame, name, 100 * share, 100 * np.asarray(lo), 100 * np.asarray(hi))


NOT_COMPUTABLE = "not computable"
NO_INTERVAL = "no interval: too little variation to resample"


def fmt_ci(est: float, lo: float, hi: float, digits: int = 2, unit: str = "",
           signed: bool = False) -> str:
    """'0.82 [0.77, 0.86]' for sentences; words instead of NaN."""
    spec = f"{'+' if signed else ''}.{digits}f"
    if not np.isfinite(est):
        return NOT_COMPUTABLE
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{est:{spec}}{unit} ({NO_INTERVAL})"
    return f"{est:{spec}}{unit} [{lo:{spec}}, {hi:{spec}}]"


def fmt_pct(est: float, lo: float, hi: float) -> str:
    """'12.3% [10.1, 14.8]' for sentences; words instead of NaN."""
    return fmt_ci(est, lo, hi, digits=1, unit="%")


def json_list(values) -> list[float | None]:
    """Floats for figure data, None where there is no value."""
    return [float(v) if np.isfinite(v) else None for v in np.asarray(values, dtype=float)]


def records(frame: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Plain JSON-ready rows for ``values`` (NaN becomes None)."""
    out = frame[columns].astype(object).where(frame[columns].notna(), None)
    return out.to_dict(orient="records")


def row_ci(row, name: str, digits: int = 2) -> str:
    """'est [lo, hi]' of a table row's estimate columns."""
    return fmt_ci(row[name], row[f"{name}_lo"], row[f"{name}_hi"], digits)


def row_pct(row, name: str) -> str:
    return fmt_pct(row[name], row[f"{name}_lo"], row[f"{name}_hi"])
