"""The audit's view of automated judgments: the judgments table joined to
the answers (model, case, sample, length) and cases (gate indicator, weight,
strata) it judges.

Judgments stay a pandas frame (millions of rows at 10x: built with column
operations only, once per audit context and shared by every judge section,
see :func:`shared`). A judgment whose output did not parse keeps no score:
it is counted, never defaulted.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from clinieval.contract import vocabulary
from clinieval.snapshot import Snapshot

if TYPE_CHECKING:  # reading the tables needs no pandas (the audit command reads ahead without)
    import pandas as pd
    import sqlalchemy as sa

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
CALL_UNIT = ["run_id", "judge_kind", "judge_model", "answer_id", "answer_b_id", "juror",
             "repeat", "shown_first"]
"""What tells one call from another beside its cache key: two answers with the
same text share a key but are two calls."""
ONE_CALL_PER_ANSWER = ("rubric", "jury")
"""Kinds whose one call scores every criterion (or axis) of an answer: rows
without a call key are grouped into calls by their unit alone."""
HIGH_RISK = 4
"""Risk levels 4-5 are high risk, 1-3 ordinary (CSEDB)."""


UNREAD = ("raw_output", "created_at", "judgment_id")
"""Judgment columns no judge section reads. The audit's judge tables leave
them out: a judge's raw outputs can be most of a judgments table's bytes,
and every judge section's rows were built from every column."""


def from_snapshot(snap: Snapshot) -> dict[str, pa.Table]:
    if snap["judgments"].num_rows == 0:
        return {}
    tables = {name: snap[name] for name in TABLES}
    judgments = tables["judgments"]
    tables["judgments"] = lean(judgments.drop_columns([c for c in UNREAD
                                                       if c in judgments.column_names]))
    return tables


def lean(table: pa.Table) -> pa.Table:
    """``table`` with its text columns dictionary-encoded (a judgments
    table repeats a few judge, criterion, status and run names, and its
    answer ids, millions of times) and a column with no value at all as
    8-bit codes of nothing (text) or single-precision NaN (numbers, not
    booleans). The values are the same; at 100x, 25 M judgments took 3.6 GB
    as texts and as many again as the pandas rows built from them. A lean
    table is returned as it is (:attr:`Judged.rows` leans any table it is
    given, so every judge section sees one form)."""
    columns = []
    for name in table.column_names:
        column = table[name]
        if pa.types.is_dictionary(column.type) or pa.types.is_float32(column.type):
            pass
        elif column.null_count == len(column) and (pa.types.is_string(column.type)
                                                   or pa.types.is_large_string(column.type)
                                                   or pa.types.is_null(column.type)):
            column = _no_values(len(column))
        elif column.null_count == len(column) and (pa.types.is_floating(column.type)
                                                   or pa.types.is_integer(column.type)):
            column = pa.chunked_array([pa.nulls(len(column), pa.float32())])
        elif pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = column.dictionary_encode()
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def _no_values(n: int) -> pa.ChunkedArray:
    return pa.chunked_array([pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int8()),
                                                            pa.array([], pa.string()))])


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
    built_from: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.built_from = _identity(self.tables)

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
        """One row per judgment with its answer's model, case, sample and
        length (and its second answer's length). Each judgment's answer is
        found once, by a hash lookup over the arrow columns, and every
        answer column is taken at those positions (millions of rows at
        scale: no per-column reindex of a string index)."""
        judgments = self.tables["judgments"]
        rows = _sorted_categories(lean(judgments).to_pandas())
        answers = self.answers
        at = self.answer_at
        for name in ("model_id", "case_id"):
            rows[name] = _take_categorical(answers[name], at)
        rows["sample_index"] = _take(answers["sample_index"], at).array
        rows["length"] = _take(answers["length_chars"], at).to_numpy(float)
        at_b = _positions(judgments["answer_b_id"], self.tables["answers"]["answer_id"])
        rows["length_b"] = _take(answers["length_chars"], at_b).to_numpy(float)
        kind = rows["judge_kind"]
        if kind.isna().any():
            if "unknown" not in kind.cat.categories:
                kind = kind.cat.add_categories(["unknown"])
            rows["judge_kind"] = kind.fillna("unknown")
        for name in ("repeat", "juror"):  # 16-bit as stored (64-bit took 400 MB at 100x)
            if rows[name].dtype.kind not in "iu":  # (a column with a missing value is float)
                rows[name] = rows[name].fillna(0).astype(np.int32)
        rows["ok"] = (rows["parse_status"].eq(vocabulary.PARSE_STATUSES[0])
                      & rows["score"].notna())
        return rows

    @cached_property
    def answer_at(self) -> np.ndarray:
        """Per row of :attr:`rows`, its answer's position in the answers
        table (-1 for an unknown id)."""
        return _positions(self.tables["judgments"]["answer_id"],
                          self.tables["answers"]["answer_id"])

    @cached_property
    def call_ids(self) -> np.ndarray:
        """A number per row of :attr:`rows` naming its call (see
        :func:`_call_ids`); computed only by what counts calls."""
        return _call_ids(self.rows, self.answer_at)

    @cached_property
    def calls(self) -> pd.DataFrame:
        """One row per call: its unit, parse status, and the tokens and
        list-price cost its rows share (a call's rows split them)."""
        rows = self.rows.assign(call=self.call_ids)
        first = rows.drop_duplicates("call").set_index("call")
        grouped = rows.groupby("call")
        sums = grouped[["input_tokens", "output_tokens", "cost_usd"]].sum(min_count=1)
        # A call is as bad as its worst row (the statuses are listed best first).
        rank = _ranks(rows["parse_status"], vocabulary.PARSE_STATUSES)
        worst = rank.groupby(rows["call"]).max()
        first["parse_status"] = np.asarray(vocabulary.PARSE_STATUSES)[worst.reindex(first.index)]
        first["ok"] = grouped["ok"].all()
        return first[[*CALL_UNIT, "parse_status", "ok", "reason"]].join(sums).reset_index()

    @cached_property
    def run_calls(self) -> pd.DataFrame | None:
        """The runs' task records (see :func:`run_tables`), None when the
        source is not the database the runs wrote to."""
        table = self.tables.get(RUN_CALLS)
        return None if table is None else table.to_pandas()

    @cached_property
    def run_attempts(self) -> pd.DataFrame | None:
        """The call log's answered attempts with their endpoint and seconds
        (see :func:`run_tables`), None when the source is not the runs' database."""
        table = self.tables.get(RUN_ATTEMPTS)
        return None if table is None else table.to_pandas()

    @cached_property
    def run_records(self) -> pd.DataFrame | None:
        """One row per run (kind, judge kind, model, what it spent), None
        when the source is not the database the runs wrote to."""
        table = self.tables.get(RUN_RECORDS)
        return None if table is None else table.to_pandas()

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


def _positions(values: pa.ChunkedArray, keys: pa.ChunkedArray) -> np.ndarray:
    """Each value's row in ``keys`` (its first), -1 where absent or null."""
    import pyarrow.compute as pc

    keys = keys.combine_chunks()
    if values.type != keys.type:
        values = values.cast(keys.type)
    found = pc.fill_null(pc.index_in(values, value_set=keys), -1)
    return found.to_numpy().astype(np.intp)


def _sorted_categories(frame: pd.DataFrame) -> pd.DataFrame:
    """Every categorical column of ``frame`` with its categories in text
    order, so that sorting and grouping by it order rows as the texts would
    (a dictionary lists its values in order of first appearance)."""
    import pandas as pd

    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            categories = column.cat.categories
            if not categories.is_monotonic_increasing:
                frame[name] = column.cat.reorder_categories(categories.sort_values())
    return frame


def _take_categorical(column: pd.Series, at: np.ndarray) -> pd.Series:
    """``column`` at the positions ``at`` (missing at -1) as a categorical
    of its sorted values: one small integer per row where the texts took
    a string each (at 100x, 25 M rows of model and case ids)."""
    import pandas as pd

    codes, uniques = pd.factorize(column, sort=True)
    taken = np.append(codes, -1)[at]  # position -1 reads the appended missing code
    return pd.Series(pd.Categorical.from_codes(taken, categories=uniques), copy=False)


def _take(column: pd.Series, at: np.ndarray) -> pd.Series:
    """``column`` at the positions ``at`` (NaN, or the dtype's missing value,
    at -1), as ``column.reindex`` of the looked-up labels would give it."""
    import pandas as pd

    return pd.Series(column.array.take(at, allow_fill=True), copy=False)


def _call_ids(rows: pd.DataFrame, answer_at: np.ndarray | None = None) -> np.ndarray:
    """A number per call (in order of first appearance). Rows of one call
    share its cache key and unit, compared as text with a missing value as
    the empty text; a row without a key is its own call unless its kind
    scores every criterion in one call. Each column is factorised on its
    own and the codes combined into one integer per row, refactorised after
    every column so that they stay below the number of rows. A row without
    a key takes a code of its own kind beside the keys' (its criterion's,
    or one shared by a whole-answer kind's rows), so no text is built per
    row (at 10x, 2.5 M rows, the texts took 1.9 s). ``answer_at`` (each
    row's answer position, :attr:`Judged.answer_at`) codes the answers
    without hashing their ids again."""
    shared = rows["judge_kind"].isin(ONE_CALL_PER_ANSWER).to_numpy()
    criterion, n_criteria, empty = text_codes(rows["criterion_id"])
    alone = np.where(shared, empty, criterion)
    keys, n_keys, _ = text_codes(rows["call_key"], missing=True)
    key = np.where(keys < 0, n_keys + alone, keys)
    combined, bound = np.zeros(len(rows), dtype=np.int64), 1
    for column in CALL_UNIT:  # one column's codes at a time
        codes, n = (answer_id_codes(rows[column], answer_at) if column == "answer_id"
                    and answer_at is not None else text_codes(rows[column])[:2])
        combined, bound = combine_codes(combined, bound, codes, n)
    combined, _ = combine_codes(combined, bound, key, n_keys + n_criteria)
    return _factorize(combined)[0]


def combine_codes(combined: np.ndarray, bound: int, codes: np.ndarray, n: int
                  ) -> tuple[np.ndarray, int]:
    """``combined * n + codes`` (codes below ``n``) and its bound, with
    ``combined`` (below ``bound``) renumbered first only when the product
    could leave 63 bits (renumbering 2.5 M codes after every column took
    0.5 s at 10x)."""
    n = max(int(n), 1)
    if bound * n >= 2**62:
        combined, bound = _factorize(combined)
        bound = max(bound, 1)
    return combined * n + codes, bound * n


def answer_id_codes(answer_id: pd.Series, answer_at: np.ndarray) -> tuple[np.ndarray, int]:
    """Codes of the rows' answer ids read as text, as :func:`text_codes`
    gives them up to numbering, and how many codes there can be: a known
    answer's position in the answers table (``answer_at``), an unknown or
    missing id a code of its own after them (factorising 2.5 M ids took
    0.5 s at 10x)."""
    at = np.asarray(answer_at, dtype=np.int64)
    n = int(at.max()) + 1 if at.size else 0
    unknown = np.flatnonzero(at < 0)
    if not unknown.size:
        return at, n
    codes, extra, _ = text_codes(answer_id.iloc[unknown])
    at = at.copy()
    at[unknown] = n + codes
    return at, n + extra


def text_codes(column: pd.Series, missing: bool = False) -> tuple[np.ndarray, int, int]:
    """Codes of ``column`` read as text, a missing value as the empty text
    (``astype("string").fillna("")``, converting only the distinct values),
    how many codes there are, and the empty text's code. With ``missing``,
    a missing value keeps code -1 instead (the empty text is then a value
    like any other)."""
    import pandas as pd

    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    texts = pd.Series(uniques).astype("string").fillna("")
    text_codes, text_uniques = pd.factorize(texts)
    empty = np.flatnonzero(np.asarray(text_uniques, dtype=object) == "")
    n = len(text_uniques)
    if missing:
        return np.append(text_codes, -1).astype(np.int64)[codes], n, -1
    blank = int(empty[0]) if empty.size else n
    lookup = np.append(text_codes, blank).astype(np.int64)  # code -1 reads the last
    return lookup[codes], n + (not empty.size), blank


def _ranks(column: pd.Series, ordered) -> pd.Series:
    """Each value's position in ``ordered`` (NaN where it is not there), as
    ``column.map`` of a dict would give it, looked up once per distinct
    value (the map of 2.5 M statuses took 1.2 s at 10x)."""
    import pandas as pd

    codes, uniques = pd.factorize(column)
    position = {s: i for i, s in enumerate(ordered)}
    found = [position.get(u) for u in uniques]
    lookup = (np.array(found + [0], dtype=np.int64) if None not in found and (codes >= 0).all()
              else np.array([np.nan if f is None else f for f in found] + [np.nan]))
    return pd.Series(lookup[codes], index=column.index)


def _factorize(values: np.ndarray) -> tuple[np.ndarray, int]:
    import pandas as pd

    codes, uniques = pd.factorize(values)
    return codes.astype(np.int64), len(uniques)


RUN_CALLS = "llm_run_calls"
"""The key under which the judge tables carry the runs' task records."""
RUN_RECORDS = "llm_runs"
"""The key under which they carry the run records (what each run spent)."""
RUN_ATTEMPTS = "llm_call_attempts"
"""The key under which they carry the call log's answered attempts (endpoint, seconds)."""


def run_tables(engine: sa.Engine) -> dict[str, pa.Table]:
    """The task records of every run in the database, each with its run's
    kind, judge kind and model: what was spent, how long calls took and why
    they failed, and the call log's answered attempts with the endpoint that
    served each (not part of a snapshot; empty when there are no runs)."""
    import sqlalchemy as sa

    from clinieval.storage.schema.runs import RUN_TABLES

    calls, runs = RUN_TABLES["llm_run_calls"], RUN_TABLES["llm_runs"]
    columns = (calls.c.run_id, calls.c.status, calls.c.parse_status, calls.c.error,
               calls.c.attempts, calls.c.input_tokens, calls.c.output_tokens,
               calls.c.latency_s, calls.c.cost_usd, runs.c.kind, runs.c.judge_kind,
               runs.c.model_id)
    query = sa.select(*columns).select_from(calls.join(runs)).order_by(calls.c.run_id,
                                                                        calls.c.task_key)
    records = sa.select(runs.c.run_id, runs.c.kind, runs.c.judge_kind, runs.c.model_id,
                        runs.c.cost_usd).order_by(runs.c.run_id)
    tried = RUN_TABLES["llm_call_attempts"]
    answered = (sa.select(tried.c.run_id, tried.c.endpoint, tried.c.latency_s, runs.c.kind,
                          runs.c.judge_kind, runs.c.model_id)
                .select_from(tried.join(runs))
                .where(tried.c.status == "ok", tried.c.endpoint.is_not(None),
                       tried.c.latency_s.is_not(None))
                .order_by(tried.c.run_id, tried.c.start, tried.c.seq))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query).mappings()]
        run_rows = [dict(r) for r in conn.execute(records).mappings()]
        attempt_rows = [dict(r) for r in conn.execute(answered).mappings()]
    if not rows:
        return {}
    tables = {RUN_CALLS: pa.Table.from_pylist(rows), RUN_RECORDS: pa.Table.from_pylist(run_rows)}
    if attempt_rows:
        tables[RUN_ATTEMPTS] = pa.Table.from_pylist(attempt_rows)
    return tables


def run_tables_at(source: str) -> dict[str, pa.Table]:
    """:func:`run_tables` of ``source`` when it names a database (a URL or a
    SQLite file), else nothing: bundles and files carry no run records."""
    import sqlalchemy as sa

    from clinieval.sources import DATABASE_URL, SQLITE_FILE
    from clinieval.storage import db
    from clinieval.storage.sqlite_read import sqlite_file_url

    if SQLITE_FILE.matches(source):
        source = sqlite_file_url(source)
    elif not DATABASE_URL.matches(source):
        return {}
    engine = db.make_engine(source)
    try:
        if not sa.inspect(engine).has_table(RUN_CALLS):
            return {}
        return run_tables(engine)
    finally:
        engine.dispose()


_SHARED: weakref.WeakValueDictionary[int, Judged] = weakref.WeakValueDictionary()
"""The judged view of each audit's judge tables while its context lives (see
:func:`shared`), keyed by the tables' identity."""


def judged(tables: dict[str, pa.Table]) -> Judged | None:
    """The judged view of ``tables``: the one an audit context shares (built
    once, read by every judge section) when ``tables`` are that context's,
    else a new one."""
    if not tables:
        return None
    found = _SHARED.get(id(tables))
    if found is not None and found.tables is tables and found.built_from == _identity(tables):
        return found
    return Judged(tables)


def shared(tables: dict[str, pa.Table]) -> Judged | None:
    """A judged view of ``tables`` that :func:`judged` returns for them as
    long as the caller keeps it (an audit context does, so its judge
    sections share one set of rows; it goes with the context)."""
    if not tables:
        return None
    view = Judged(tables)
    _SHARED[id(tables)] = view
    return view


def _identity(tables: dict[str, pa.Table]) -> tuple:
    """What the view was built from: a table added or replaced afterwards
    (the tables dict is updated in place) makes it stale."""
    return tuple((name, id(table)) for name, table in tables.items())


def risk_band(level: pd.Series) -> pd.Series:
    """'ordinary (1-3)' or 'high (4-5)'; 'unknown' without a level."""
    import pandas as pd

    band = np.where(level >= HIGH_RISK, "high (4-5)", "ordinary (1-3)")
    return pd.Series(np.where(level.isna(), "unknown", band), index=level.index)
