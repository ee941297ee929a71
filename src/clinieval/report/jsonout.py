"""``results.json``: every number of the audit, byte-identical for identical inputs.

Keys are sorted, floats rounded to 6 significant digits, NaN and infinities
become null, and nothing depends on the time or the machine (absolute paths
are reduced to their last component).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import numbers
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import pandas as pd

from clinieval.audit.result import AuditResult, Section
from clinieval.report.cells import flatten, is_missing

SIGNIFICANT = 6
FORMAT = "clinieval-audit-results"
FORMAT_VERSION = 1


def results_document(result: AuditResult, figure_files: dict[str, dict[str, str]]) -> dict:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": result.version,
        "snapshot": strip_paths(result.snapshot),
        "settings": result.settings.describe(),
        "seed": result.settings.seed,
        "headlines": list(result.headlines),
        "sections": [_section(s, figure_files) for s in result.sections],
    }


def _section(section: Section, figure_files: dict[str, dict[str, str]]) -> dict:
    try:
        values = canonical(section.values)
    except TypeError as err:
        raise TypeError(f"section {section.key!r}: {err}") from err
    return {
        "key": section.key,
        "title": section.title,
        "summary": section.summary,
        "skipped": section.skipped,
        "values": values,
        "tables": {name: _records(frame) for name, frame in section.tables.items()},
        "figures": [{"key": f.key, "title": f.title, "kind": f.kind, "caption": f.caption,
                     "files": figure_files.get(f.key, {})} for f in section.figures],
    }


def _records(frame: pd.DataFrame) -> list[dict]:
    # Missing values become None row by row: cheaper than a frame-wide
    # astype(object).where(...) on many small tables.
    return [{key: None if is_missing(value) else value for key, value in row.items()}
            for row in flatten(frame).to_dict(orient="records")]


def dumps(document: Any) -> str:
    return json.dumps(canonical(document), sort_keys=True, ensure_ascii=False, indent=1,
                      allow_nan=False) + "\n"


def canonical(value: Any) -> Any:
    """Plain JSON types with rounded floats; raises on objects it cannot represent."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return round_float(float(value))
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset | np.ndarray | pd.Series):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        return [canonical(v) for v in items]
    if isinstance(value, pd.DataFrame):
        return canonical(_records(value))
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, PurePath):
        return value.name if value.is_absolute() else value.as_posix()
    if isinstance(value, dt.datetime | dt.date | pd.Timestamp):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return canonical(value.model_dump(mode="json"))
    raise TypeError(f"results.json cannot represent {type(value).__name__}: {value!r}")


def round_float(x: float) -> float | None:
    if not math.isfinite(x):
        return None
    rounded = float(f"{x:.{SIGNIFICANT}g}")
    return 0.0 if rounded == 0 else rounded


def strip_paths(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Snapshot info without absolute paths (a bundle folder becomes its name)."""
    def clean(value):
        if isinstance(value, str) and Path(value).is_absolute():
            return Path(value).name
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value
    return {k: clean(v) for k, v in snapshot.items()}
