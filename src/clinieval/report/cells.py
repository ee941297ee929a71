"""Turn a section's DataFrame into display rows shared by the HTML and Markdown reports.

Conventions (from :class:`clinieval.audit.result.Section`): an estimate column
``x`` with sibling columns ``x_lo`` and ``x_hi`` is shown as one cell
"0.82 [0.77, 0.86]" and the siblings are hidden; its count comes from ``x_n``
or ``n``. Columns ending in ``_pct`` already hold percentages. A sibling
column ``x_href`` holds a link for the cell of ``x`` (hidden too; missing:
no link), e.g. into the run viewer.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

MISSING = "—"
CHECK = "✓"
PROSE_CHARS = 40  # text columns with longer values get room to wrap as prose
TIGHT_CHARS = 24  # ... and columns of short names never wrap


@dataclass(frozen=True)
class Column:
    name: str
    label: str
    numeric: bool
    estimate: bool = False
    count: str | None = None  # the column that holds this estimate's n
    layout: str = ""  # "prose" (long text: give it room to wrap) or "tight" (never wrap)


@dataclass(frozen=True)
class Cell:
    text: str
    sort: str  # raw value for sorting: a plain number, or the text
    title: str = ""
    href: str = ""  # where the cell links to ("": nowhere)


@dataclass(frozen=True)
class TableView:
    name: str
    label: str
    columns: list[Column]
    rows: list[list[Cell]]


def table_view(name: str, frame: pd.DataFrame) -> TableView:
    frame = flatten(frame)
    columns = _columns(frame)
    rows = [[_cell(record, column) for column in columns]
            for record in frame.to_dict(orient="records")]
    return TableView(name=name, label=pretty(name), columns=columns, rows=rows)


def flatten(frame: pd.DataFrame) -> pd.DataFrame:
    """Keep a meaningful index as leading columns and join MultiIndex column names."""
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None:
        frame = frame.reset_index()
    if isinstance(frame.columns, pd.MultiIndex):
        frame = frame.set_axis(["_".join(str(p) for p in c if str(p)) for c in frame.columns],
                               axis=1)
    return frame.set_axis([str(c) for c in frame.columns], axis=1)


def pretty(name: str) -> str:
    """``fail_pct`` -> "fail %", ``fail_pct_n`` -> "fail % n", ``by_model`` -> "by model"."""
    return re.sub(r"_pct(?=_|$)", " %", name).replace("_", " ").strip()


def _columns(frame: pd.DataFrame) -> list[Column]:
    names = list(frame.columns)
    estimates = {x for x in names if f"{x}_lo" in names and f"{x}_hi" in names}
    hidden = {f"{x}_{side}" for x in estimates for side in ("lo", "hi")}
    hidden |= {f"{x}_href" for x in names if f"{x}_href" in names}
    out = []
    for name in names:
        if name in hidden:
            continue
        count = next((c for c in (f"{name}_n", "n") if c in names), None)
        numeric = _is_numeric(frame[name])
        out.append(Column(name=name, label=pretty(name), numeric=numeric,
                          estimate=name in estimates, count=count if name in estimates else None,
                          layout="" if numeric else _text_layout(frame[name])))
    return out


def _text_layout(series: pd.Series) -> str:
    longest = max((len(str(v)) for v in series.dropna()), default=0)
    return "prose" if longest > PROSE_CHARS else "tight" if longest <= TIGHT_CHARS else ""


def _is_numeric(series: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return True
    values = series.dropna()
    return len(values) > 0 and all(isinstance(v, numbers.Number) for v in values)


def _cell(record: dict, column: Column) -> Cell:
    value = record[column.name]
    href = record.get(f"{column.name}_href")
    href = "" if href is None or is_missing(href) else str(href)
    if not column.estimate:
        return Cell(format_value(value, column.name), sort_key(value), href=href)
    lo, hi = record[f"{column.name}_lo"], record[f"{column.name}_hi"]
    title = _count_title(record.get(column.count)) if column.count else ""
    return Cell(format_interval(value, lo, hi, column.name), sort_key(value), title, href)


def _count_title(n) -> str:
    return "" if is_missing(n) else f"n = {format_count(n)}"


def is_missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and math.isnan(value)


def sort_key(value) -> str:
    """What ``data-sort`` carries: a plain number for numbers, the text otherwise."""
    if is_missing(value):
        return ""
    if isinstance(value, bool | np.bool_):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        return ("Infinity" if x > 0 else "-Infinity") if math.isinf(x) else repr(x)
    return str(value)


def format_value(value, name: str = "") -> str:
    if is_missing(value):
        return MISSING
    if isinstance(value, bool | np.bool_):
        return CHECK if value else ""
    if isinstance(value, numbers.Integral):
        return f"{int(value)}%" if name.endswith("_pct") else format_count(value)
    if isinstance(value, numbers.Real):
        return _format_real(float(value), name)
    return str(value)


def _format_real(x: float, name: str) -> str:
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if name.endswith("_pct"):
        return fixed(x, 1) + "%"
    if _is_count_name(name) and x.is_integer():
        return format_count(x)
    if _is_p_name(name):
        return format_p(x)
    return fixed(x, decimals(x))


def format_interval(est, lo, hi, name: str = "") -> str:
    """"0.82 [0.77, 0.86]": one number of decimals for all three, set by the largest
    magnitude among them (percentages: "12.3% [10.1%, 14.8%]")."""
    if is_missing(est):
        return MISSING
    if is_missing(lo) or is_missing(hi):
        return format_value(est, name)
    if name.endswith("_pct"):
        return f"{fixed(est, 1)}% [{fixed(lo, 1)}%, {fixed(hi, 1)}%]"
    bounds = (float(est), float(lo), float(hi))
    # all three whole numbers (ranks, counts): no decimals; else by the largest magnitude
    places = 0 if all(b.is_integer() for b in bounds) else decimals(max(map(abs, bounds)))
    return f"{fixed(est, places)} [{fixed(lo, places)}, {fixed(hi, places)}]"


def fixed(x: float, places: int) -> str:
    """``x`` with ``places`` decimals and thousands separators; never "-0.00"."""
    text = f"{float(x):,.{places}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text


def decimals(x: float) -> int:
    """Decimals that show two to three significant digits: 123 -> 0, 12.3 -> 1,
    1.23 / 0.82 -> 2, 0.031 -> 3; capped at 6."""
    if x == 0 or not math.isfinite(x):
        return 2
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= 2:
        return 0
    if magnitude == 1:
        return 1
    return min(6, max(2, 1 - magnitude))


def format_count(value) -> str:
    return f"{int(value):,}"


def format_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _is_count_name(name: str) -> bool:
    return name in ("n", "count") or name.endswith(("_n", "_count")) or name.startswith("n_")


def _is_p_name(name: str) -> bool:
    return name in ("p", "p_value", "pvalue") or name.endswith(("_p", "_p_value"))
