"""The audit's view of automated judgments: the judgments table joined to
the answers (model, case, sample, length) and cases (gate indicator, weight,
strata) it judges.

Judgments are few next to ratings, so they stay a pandas frame. A judgment
whose output did not parse keeps no score: it is counted, never defaulted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from clinieval.contract import tabular, vocabulary
from clinieval.snapshot import Snapshot, conform

if TYPE_CHECKING:  # reading the tables needs no pandas (the audit command reads ahead without)
    import pandas as pd

TABLES = ("judgments", "cases", "answers", "models")
"""What the judge sections read, besides the ratings the audit already has."""

_COLUMNS = {
    "cases": ["case_id", "specialty", "subcategory", "department", "population",
              "risk_level", "weight"],
    "answers": ["answer_id", "case_id", "model_id", "length_chars", "tokens", "cost_usd",
                "sample_index"],
    "models": ["model_id", "display_name", "provider", "price_input_per_m",
               "price_output_per_m"],
}
HIGH_RISK = 4
"""Risk levels 4-5 are high risk, 1-3 ordinary (CSEDB)."""


def from_bundle(folder: Path, manifest: dict) -> dict[str, pa.Table]:
    """The judge tables of a bundle; empty when it holds no judgments (older
    bundles lack the later judgment columns, which are filled with nulls)."""
    entry = manifest["tables"].get("judgments")
    if not entry or not entry["rows"]:
        return {}
    out = {"judgments": conform(pq.read_table(Path(folder) / entry["file"]),
                                tabular.JUDGMENTS)}
    for name, columns in _COLUMNS.items():
        path = Path(folder) / manifest["tables"][name]["file"]
        present = [c for c in columns if c in pq.read_schema(path).names]
        out[name] = pq.read_table(path, columns=present)
    return out


def from_snapshot(snap: Snapshot) -> dict[str, pa.Table]:
    if snap["judgments"].num_rows == 0:
        return {}
    return {name: snap[name] for name in TABLES}


def _frame(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    frame = table.to_pandas()
    for c in columns:
        if c not in frame:
            frame[c] = None
    return frame[columns]


@dataclass
class Judged:
    """Judgments with their answer's model, case and sample, and the cases'
    strata. ``ok`` marks parsed rows, the only ones with a usable score."""

    tables: dict[str, pa.Table]

    @cached_property
    def cases(self) -> pd.DataFrame:
        cases = _frame(self.tables["cases"], _COLUMNS["cases"]).set_index("case_id")
        cases["department"] = cases["department"].fillna(cases["specialty"])
        cases["population"] = cases["population"].fillna("unknown")
        return cases

    @cached_property
    def answers(self) -> pd.DataFrame:
        answers = _frame(self.tables["answers"], _COLUMNS["answers"]).set_index("answer_id")
        answers["sample_index"] = answers["sample_index"].fillna(0).astype(int)
        return answers

    @cached_property
    def model_names(self) -> dict[str, str]:
        models = _frame(self.tables["models"], _COLUMNS["models"])
        return {m: n or m for m, n in zip(models["model_id"], models["display_name"],
                                          strict=True)}

    @cached_property
    def rows(self) -> pd.DataFrame:
        rows = self.tables["judgments"].to_pandas()
        answers = self.answers
        rows["model_id"] = answers["model_id"].reindex(rows["answer_id"]).to_numpy()
        rows["case_id"] = answers["case_id"].reindex(rows["answer_id"]).to_numpy()
        rows["sample_index"] = answers["sample_index"].reindex(rows["answer_id"]).to_numpy()
        rows["length"] = answers["length_chars"].reindex(rows["answer_id"]).to_numpy(float)
        rows["length_b"] = answers["length_chars"].reindex(rows["answer_b_id"]).to_numpy(float)
        rows["judge_kind"] = rows["judge_kind"].fillna("unknown")
        rows["repeat"] = rows["repeat"].fillna(0).astype(int)
        rows["juror"] = rows["juror"].fillna(0).astype(int)
        rows["ok"] = (rows["parse_status"].eq(vocabulary.PARSE_STATUSES[0])
                      & rows["score"].notna())
        return rows

    def kind(self, judge_kind: str) -> pd.DataFrame:
        """Rows of one judge kind (every parse status)."""
        return self.rows[self.rows["judge_kind"] == judge_kind]

    def name(self, model_id: str) -> str:
        return self.model_names.get(model_id, model_id)

    def unparsed_only(self, kinds: tuple[str, ...]) -> str | None:
        """Why there is nothing to score when every judgment of ``kinds``
        failed to parse (a judge outage), else None."""
        rows = self.rows[self.rows["judge_kind"].isin(kinds)]
        if rows.empty or rows["ok"].any():
            return None
        return (f"every {' and '.join(kinds)} judgment ({len(rows):,}) is unparsed, so none"
                " has a score (a judge outage?).")


def judged(tables: dict[str, pa.Table]) -> Judged | None:
    return Judged(tables) if tables else None


def risk_band(level: pd.Series) -> pd.Series:
    """'ordinary (1-3)' or 'high (4-5)'; 'unknown' without a level."""
    import pandas as pd

    band = np.where(level >= HIGH_RISK, "high (4-5)", "ordinary (1-3)")
    return pd.Series(np.where(level.isna(), "unknown", band), index=level.index)
