"""Fuzzing every import format against a database that already holds a snapshot.

Each test starts from a valid input of one format, mutates it (types, ranges,
encodings, nesting, sizes, structure) and imports it. The property: the only
exception is :class:`InputError`, its message names the input, and a refused
input leaves the database as it was. Accepted inputs are rolled back to the
baseline so later examples can reach the database too.

The default run is a few hundred inputs on SQLite and fewer on PostgreSQL;
``pytest -m slow tests/io/test_fuzz_import.py`` runs ten times as many. The
outcome counts are printed at the end of the module.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from clinieval.contract import tabular
from clinieval.errors import InputError
from clinieval.io.bundle import MANIFEST, content_sha256, snapshot_checksum, write_bundle
from clinieval.io.importer import import_snapshot
from clinieval.snapshot import conform
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.testing import snapshot_from_rows
from tests.helpers import renamed_tiny_tables

DATA = Path(__file__).parents[1] / "data" / "formats"
FOREIGN = {"moove": DATA / "moove_export.json", "arena": DATA / "arena_battles.json",
           "healthbench": DATA / "healthbench.jsonl"}
EXAMPLES = {"sqlite": 50, "postgresql": 10}
SLOW_FACTOR = 10
OUTCOMES: Counter = Counter()

# --------------------------------------------------------------------------
# Mutations of JSON-like values

SPECIAL = st.sampled_from([
    None, True, False, 0, -1, 1, 3, 12, 2**31, 2**63, -(2**63) - 1, 2**64, 10**30, 1.5, -0.0,
    float("nan"), float("inf"), float("-inf"), 1e308, "", " ", "\x00", "\ud800", "\udfff x",
    "NA", "null", "007", " 2 ", "12", "-2", "true", "2024-13-45T99:00:00", "1e999",
    "\u2028", "tie (bothbad)", "model_a", "x" * 5000, "../../etc/passwd", "/dev/zero",
])
LEAVES = st.one_of(SPECIAL, st.integers(), st.floats(), st.text(max_size=12), st.booleans())
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


def _paths(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def _mutate_once(draw, doc):
    """One structural or value mutation at a random place in ``doc``."""
    path = draw(st.sampled_from(list(_paths(doc))))
    op = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "nest", "grow",
                               "rename"]))
    if not path:
        return draw(VALUES) if op == "replace" else [doc] if op == "nest" else doc
    parent, key = _get(doc, path[:-1]), path[-1]
    old = parent[key]
    if op == "replace":
        parent[key] = draw(VALUES)
    elif op == "delete":
        del parent[key]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(old))
        else:
            parent[draw(st.text(max_size=6))] = copy.deepcopy(old)
    elif op == "nest":
        for _ in range(draw(st.sampled_from([1, 3, 70]))):
            old = [old]
        parent[key] = old
    elif op == "grow":
        times = draw(st.sampled_from([2, 50, 2000]))
        parent[key] = old * times if isinstance(old, str | list) else old
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=10))] = parent.pop(key)
    return doc


MAX_SIZE = 4_000_000
"""Characters plus values a mutated input may hold: growth compounds, and an
input of gigabytes tests the machine, not the reader."""


def _size(value, budget: int) -> int:
    """Characters plus values in ``value``, counting stops past ``budget``."""
    stack, total = [value], 0
    while stack and total <= budget:
        item = stack.pop()
        total += len(item) if isinstance(item, str) else 1
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
    return total


def mutate(draw, doc):
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        doc = _mutate_once(draw, doc)
        if _size(doc, MAX_SIZE) > MAX_SIZE:
            reject()
    return doc


def mutate_bytes(draw, data: bytes) -> bytes:
    """Sometimes damage the bytes: truncate, insert, re-encode."""
    op = draw(st.sampled_from(["none", "none", "none", "truncate", "insert", "utf16", "latin1",
                               "bom", "deep"]))
    at = draw(st.integers(0, len(data)))
    if op == "deep":  # nesting far beyond what Python's parser can recurse into
        return b"[" * 5000 + data + b"]" * 5000
    if op == "truncate":
        return data[:at]
    if op == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # Parquet: binary already
        return data
    if op == "utf16":
        return text.encode("utf-16", "surrogatepass")
    if op == "latin1":
        return text.encode("latin-1", "replace")
    return b"\xef\xbb\xbf" + data if op == "bom" else data


def dumps(value, draw) -> bytes:
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------
# Writers for each format (bytes produced on purpose may be invalid)


def _csv_bytes(rows: list) -> bytes:
    rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
    names = list(dict.fromkeys(str(k) for r in rows for k in r))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(names)
    for row in rows:
        values = {str(k): v for k, v in row.items()}
        writer.writerow(["" if values.get(n) is None else values[n] for n in names])
    return out.getvalue().encode("utf-8", "surrogatepass")


def _jsonl_bytes(rows: list, draw) -> bytes:
    return b"".join(dumps(row, draw) + b"\n" for row in rows)


def _parquet_bytes(rows: list) -> bytes:
    rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
    names = list(dict.fromkeys(str(k) for r in rows for k in r))
    columns = {}
    for name in names:
        values = [{str(k): v for k, v in r.items()}.get(name) for r in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowException, OverflowError, UnicodeEncodeError):
            columns[name] = pa.array([json.dumps(v) for v in values])
    sink = pa.BufferOutputStream()
    try:
        pq.write_table(pa.table(columns) if columns else pa.table({"x": [1]}), sink)
    except (pa.ArrowException, UnicodeEncodeError):
        reject()
    return sink.getvalue().to_pybytes()


def tables_doc() -> dict:
    rows = renamed_tiny_tables("f-", 5000)
    rows.pop("criteria")
    return json.loads(json.dumps(rows, default=str))


def write_tables(folder: Path, doc, fmt: str, draw) -> Path:
    folder.mkdir()
    if not isinstance(doc, dict):
        doc = {"cases": doc}
    for name, rows in doc.items():
        stem = (name if name in tabular.BY_NAME
                else str(name)[:40].replace("/", "_").replace("\x00", ""))
        rows = rows if isinstance(rows, list) else [rows]
        data = {"csv": _csv_bytes, "parquet": _parquet_bytes}.get(fmt)
        data = data(rows) if data else _jsonl_bytes(rows, draw)
        try:
            (folder / f"{stem or 'x'}.{fmt}").write_bytes(data)
        except (OSError, ValueError):
            reject()
    files = sorted(folder.iterdir())
    if files:
        target = draw(st.sampled_from(files))
        target.write_bytes(mutate_bytes(draw, target.read_bytes()))
    return folder


WRONG_TYPES = {
    "integers": lambda n: pa.array(range(n), pa.int64()),
    "booleans": lambda n: pa.array([True] * n),
    "floats": lambda n: pa.array([1.5] * n),
    "non-UTF-8 binary": lambda n: pa.array([b"\xff\xfe" + bytes([i % 256]) for i in range(n)]),
    "huge integers": lambda n: pa.array([2**62] * n, pa.int64()),
    "timestamps": lambda n: pa.array([0] * n, pa.timestamp("s")),
}
"""Columns of a type no reader should take silently for the contract's."""


def _retype(folder: Path, name: str, draw) -> None:
    """Replace one column of a bundle's table by a column of another Arrow type."""
    path = folder / f"{name}.parquet"
    data = pq.read_table(path)
    if not data.num_rows:
        return
    column = draw(st.sampled_from(data.column_names))
    values = WRONG_TYPES[draw(st.sampled_from(sorted(WRONG_TYPES)))](data.num_rows)
    pq.write_table(data.set_column(data.column_names.index(column), column, values), path)


def _mutate_manifest_paths(manifest: dict, name: str, draw) -> None:
    """Point a table's entry outside the bundle or at an impossible size."""
    entry = manifest["tables"][name]
    change = draw(st.sampled_from(["outside", "absolute", "rows", "negative rows"]))
    if change == "outside":
        entry["file"] = f"../{entry['file']}"
    elif change == "absolute":
        entry["file"] = "/etc/passwd"
    else:
        entry["rows"] = 10**12 if change == "rows" else -1


def write_bundle_folder(folder: Path, draw) -> Path:
    """A valid bundle, then a mutated table (checksums fixed or not), a column of
    the wrong Arrow type, and/or a mutated manifest."""
    write_bundle(snapshot_from_rows(renamed_tiny_tables("f-", 5000)), folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    name = draw(st.sampled_from([t.name for t in tabular.ALL if t.name in manifest["tables"]]))
    if draw(st.booleans()):
        _retype(folder, name, draw)
        _fix_checksums(folder, manifest, name)
    elif draw(st.booleans()):
        rows = pq.read_table(folder / f"{name}.parquet").to_pylist()
        rows = mutate(draw, json.loads(json.dumps(rows, default=str)) or [{}])
        (folder / f"{name}.parquet").write_bytes(
            mutate_bytes(draw, _parquet_bytes(rows if isinstance(rows, list) else [rows])))
        # "file": the forgery, the file's SHA-256 and row count brought
        # in step, the content and snapshot checksums left stale.
        fix = draw(st.sampled_from(["none", "file", "all"]))
        if fix != "none":
            _fix_checksums(folder, manifest, name, content=fix == "all")
    if draw(st.booleans()):
        _mutate_manifest_paths(manifest, name, draw)
    if draw(st.booleans()):
        manifest = mutate(draw, manifest)
    (folder / MANIFEST).write_bytes(mutate_bytes(draw, dumps(manifest, draw)))
    return folder


def _fix_checksums(folder: Path, manifest: dict, name: str, content: bool = True) -> None:
    """Make the manifest agree with an edited table, so the edit reaches the
    reader; without ``content``, only the file's SHA-256 and row count."""
    path = folder / f"{name}.parquet"
    entry = manifest["tables"][name]
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        data = conform(pq.read_table(path), tabular.BY_NAME[name])
        entry["rows"] = data.num_rows
        if not content:
            return
        entry["content_sha256"] = content_sha256(data, tabular.BY_NAME[name].key)
    except (InputError, pa.ArrowException, OSError):
        return
    manifest["snapshot_sha256"] = snapshot_checksum(
        {k: v["content_sha256"] for k, v in manifest["tables"].items()})


def write_foreign(path: Path, doc, draw) -> Path:
    if isinstance(doc, list) and path.suffix == ".jsonl":
        data = _jsonl_bytes(doc, draw)
    else:
        data = dumps(doc, draw)
    path.write_bytes(mutate_bytes(draw, data))
    return path


def foreign_doc(name: str):
    text = FOREIGN[name].read_text("utf-8")
    if FOREIGN[name].suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


# --------------------------------------------------------------------------
# The property


def baseline():
    return snapshot_from_rows(renamed_tiny_tables("base-", 1_000_000))


def attempt(engine, source: Path, fmt: str, label: str) -> None:
    """Import ``source``: refused with a named InputError and nothing written,
    or accepted (then the database goes back to the baseline)."""
    before = db.counts(engine)
    try:
        snap, sources = read_source(source, fmt=fmt)
        import_snapshot(engine, snap, sources=sources)
    except InputError as err:
        assert str(source) in str(err), str(err)
        assert "\n" not in str(err), str(err)
        assert db.counts(engine) == before, str(err)
        OUTCOMES[label, "refused"] += 1
        return
    OUTCOMES[label, "accepted"] += 1
    import_snapshot(engine, baseline(), replace=True)


FORMATS = ["moove", "arena", "healthbench", "tables-csv", "tables-jsonl", "tables-parquet",
           "bundle"]


def build(draw, work: Path, kind: str) -> tuple[Path, str]:
    """A mutated input of ``kind`` in a fresh folder, and the --format to read it with."""
    if kind in FOREIGN:
        doc = mutate(draw, foreign_doc(kind))
        path = write_foreign(work / FOREIGN[kind].name, doc, draw)
        return path, draw(st.sampled_from(["auto", kind]))
    if kind == "bundle":
        return write_bundle_folder(work / "bundle", draw), "auto"
    fmt = kind.split("-")[1]
    return write_tables(work / "tables", mutate(draw, tables_doc()), fmt, draw), "auto"


@pytest.fixture(scope="module", autouse=True)
def report(request):
    """Print how many inputs were fuzzed and how they ended (outside capture)."""
    yield
    if not OUTCOMES:
        return
    counts = ", ".join(f"{label} {outcome} {n}" for (label, outcome), n in sorted(OUTCOMES.items()))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nfuzzed inputs: {sum(OUTCOMES.values())} ({counts}); every refusal an"
              " InputError naming the input, with the database unchanged")


@pytest.mark.parametrize("scale", [1, pytest.param(SLOW_FACTOR, marks=pytest.mark.slow)],
                         ids=["default", "slow"])
@pytest.mark.parametrize("kind", FORMATS)
def test_mutated_input_is_refused_cleanly_or_imported(engine, request, tmp_path_factory, kind,
                                                      scale):
    if scale > 1 and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the large fuzz run: pytest -m slow tests/io/test_fuzz_import.py")
    backend = engine.dialect.name
    import_snapshot(engine, baseline())

    @settings(max_examples=EXAMPLES[backend] * scale, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        work = tmp_path_factory.mktemp("fuzz")
        source, fmt = build(data.draw, work, kind)
        attempt(engine, source, fmt, f"{backend}/{kind}")

    run()


# --------------------------------------------------------------------------
# The audit: the same inputs, through the command a user runs

AUDITED = ["bundle", "tables-parquet", "tables-jsonl"]
AUDIT_EXAMPLES = 12


def audit_attempt(source: Path, out: Path, label: str) -> None:
    """``clinieval audit`` on ``source``: a report, or exit 2 with one
    ``error:`` line naming the input; never a traceback. A source the import's
    reading and validation refuse is refused by the audit too."""
    from typer.testing import CliRunner

    from clinieval.cli import app
    from clinieval.contract.validate import check_no_nul, validate

    try:
        snap, sources = read_source(source)
        check_no_nul(snap, sources)
        validate(snap, sources=sources)
        imported = True
    except InputError:
        imported = False
    result = CliRunner().invoke(app, ["audit", str(source), "--out", str(out),
                                      "--bootstrap", "50"])
    assert result.exit_code in (0, 2), result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    if result.exit_code == 2:
        assert result.output.startswith("error:") and str(source) in result.output, result.output
    assert (result.exit_code == 0) == imported, result.output
    OUTCOMES[label, "audited" if imported else "refused"] += 1


@pytest.mark.parametrize("scale", [1, pytest.param(SLOW_FACTOR, marks=pytest.mark.slow)],
                         ids=["default", "slow"])
@pytest.mark.parametrize("kind", AUDITED)
def test_mutated_input_is_refused_cleanly_or_audited(request, tmp_path_factory, kind, scale):
    if scale > 1 and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the large fuzz run: pytest -m slow tests/io/test_fuzz_import.py")

    @settings(max_examples=AUDIT_EXAMPLES * scale, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        work = tmp_path_factory.mktemp("fuzz-audit")
        source, _ = build(data.draw, work, kind)
        audit_attempt(source, work / "out", f"audit/{kind}")

    run()
