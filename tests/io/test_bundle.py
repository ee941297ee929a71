"""Bundles: manifest, checksums, and import -> export -> import round trips."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.contract import tabular
from clinieval.errors import InputError
from clinieval.io.bundle import MANIFEST, read_bundle, read_manifest, write_bundle
from clinieval.io.export import export_snapshot, pseudonym
from clinieval.io.importer import import_snapshot
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.testing import STAMP, snapshot_from_rows, tiny_snapshot, tiny_tables


def test_manifest_lists_counts_and_checksums(tmp_path):
    snap = tiny_snapshot()
    manifest = write_bundle(snap, tmp_path / "b")
    on_disk = read_manifest(tmp_path / "b")
    assert on_disk["schema_version"] == 1
    assert on_disk["tables"]["ratings"]["rows"] == snap.counts()["ratings"]
    assert len(on_disk["tables"]["ratings"]["sha256"]) == 64
    assert on_disk["snapshot_sha256"] == manifest["snapshot_sha256"]


def test_edited_file_is_detected(tmp_path):
    write_bundle(tiny_snapshot(), tmp_path / "b")
    (tmp_path / "b" / "models.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(InputError, match="models.parquet.*does not match the SHA-256"):
        read_bundle(tmp_path / "b")


def test_newer_schema_version_is_refused(tmp_path):
    write_bundle(tiny_snapshot(), tmp_path / "b")
    path = tmp_path / "b" / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["schema_version"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(InputError,
                       match="field 'schema_version'.*less than or equal to 1.*got 99"):
        read_bundle(tmp_path / "b")


def test_existing_bundle_is_not_overwritten_by_accident(tmp_path):
    write_bundle(tiny_snapshot(), tmp_path / "b")
    with pytest.raises(InputError, match="not empty"):
        write_bundle(tiny_snapshot(), tmp_path / "b")


def test_export_pseudonymises_rater_ids(engine, tmp_path):
    import_snapshot(engine, tiny_snapshot())
    snap = db.read_snapshot(engine)
    export_snapshot(snap, tmp_path / "e", salt="s3cret")
    out = read_bundle(tmp_path / "e")
    expected = sorted(pseudonym(r, "s3cret") for r in ("rater-1", "rater-2"))
    assert sorted(out["raters"].column("rater_id").to_pylist()) == expected
    assert set(out["ratings"].column("rater_id").to_pylist()) == set(expected)
    assert "rater-1" not in (tmp_path / "e" / "ratings.parquet").read_bytes().decode("latin-1")
    assert out.meta["rater_ids"] == "pseudonymous"


def test_keep_rater_ids_keeps_them(tmp_path):
    export_snapshot(tiny_snapshot(), tmp_path / "e", salt="x", keep_rater_ids=True)
    ids = read_bundle(tmp_path / "e")["raters"].column("rater_id").to_pylist()
    assert sorted(ids) == ["rater-1", "rater-2"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_table_exports_read_back(tmp_path, fmt):
    snap = tiny_snapshot()
    export_snapshot(snap, tmp_path / "t", fmt=fmt, salt="x", keep_rater_ids=True)
    back, _ = read_source(tmp_path / "t")
    assert back.counts() == snap.counts()
    scores = back["ratings"].column("score").to_pylist()
    assert scores == snap["ratings"].column("score").to_pylist()


TEXT = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
"""Any text the contract stores: no NUL (PostgreSQL refuses it), no lone surrogates."""


RATERS = [pseudonym(f"rater-{i}", "fixture") for i in range(3)]
"""Ids already in pseudonym form, which exports keep as they are."""


@st.composite
def snapshots(draw):
    """Small random but valid snapshots."""
    n_models = draw(st.integers(2, 4))
    n_cases = draw(st.integers(1, 4))
    n_raters = draw(st.integers(1, 3))
    criteria = [c["criterion_id"] for c in rubric_to_rows(load_rubric())]
    answers = [{"answer_id": f"a{c}-{m}", "case_id": f"c{c}", "model_id": f"m{m}",
                "length_chars": draw(st.integers(0, 5000)),
                "text": draw(st.one_of(st.none(), st.text(TEXT, max_size=20)))}
               for c in range(n_cases) for m in range(n_models)]
    keys = draw(st.lists(st.tuples(st.sampled_from(answers), st.integers(0, n_raters - 1),
                                   st.sampled_from(criteria)), max_size=40, unique_by=lambda k: (
                                       k[0]["answer_id"], k[1], k[2])))
    ratings = [{"rating_id": i, "answer_id": a["answer_id"], "rater_id": RATERS[r],
                "criterion_id": c, "score": draw(st.integers(-2, 2)), "revision": 0,
                "comment": draw(st.one_of(st.none(), st.text(TEXT, max_size=10))),
                "created_at": STAMP}
               for i, (a, r, c) in enumerate(keys)]
    prefs = []
    for i in range(draw(st.integers(0, 6))):
        case = draw(st.integers(0, n_cases - 1))
        a, b = draw(st.lists(st.integers(0, n_models - 1), min_size=2, max_size=2, unique=True))
        prefs.append({"preference_id": i, "case_id": f"c{case}", "answer_a_id": f"a{case}-{a}",
                      "answer_b_id": f"a{case}-{b}", "shown_left": draw(st.sampled_from("AB")),
                      "choice": draw(st.sampled_from(["A", "B", "tie", "both_bad"])),
                      "rater_id": RATERS[draw(st.integers(0, n_raters - 1))]})
    return snapshot_from_rows({
        "cases": [{"case_id": f"c{c}",
                   "specialty": draw(st.sampled_from(["Cardiology", "Oncology"])),
                   "prompt": draw(st.text(TEXT, min_size=1, max_size=30))} for c in range(n_cases)],
        "models": [{"model_id": f"m{m}"} for m in range(n_models)],
        "answers": answers,
        "raters": [{"rater_id": RATERS[r]} for r in range(n_raters)],
        "criteria": rubric_to_rows(load_rubric()),
        "ratings": ratings,
        "preferences": prefs,
    }, {"rater_ids": "pseudonymous"})


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(snap=snapshots())
def test_import_export_import_is_lossless(tmp_path_factory, snap):
    """Property: bundle -> SQLite -> bundle -> SQLite gives the same content checksums."""
    work = tmp_path_factory.mktemp("rt")
    first = write_bundle(snap, work / "in")
    engine = db.make_engine(f"sqlite:///{work / 'a.db'}")
    db.upgrade(engine)
    loaded, sources = read_source(work / "in")
    import_snapshot(engine, loaded, sources=sources)
    second = export_snapshot(db.read_snapshot(engine), work / "out", salt="x")
    engine2 = db.make_engine(f"sqlite:///{work / 'b.db'}")
    db.upgrade(engine2)
    import_snapshot(engine2, read_source(work / "out")[0])
    third = export_snapshot(db.read_snapshot(engine2), work / "out2", salt="x")
    for manifest in (second, third):
        assert manifest["snapshot_sha256"] == first["snapshot_sha256"]
        assert {k: v["rows"] for k, v in manifest["tables"].items()} == {
            k: v["rows"] for k, v in first["tables"].items()}
    engine.dispose()
    engine2.dispose()


def test_raw_ids_appended_to_a_pseudonymous_database_are_pseudonymised(engine, tmp_path):
    """A synthetic (pseudonymous) snapshot plus raw clinician ids: the export
    must hash them, not trust the first import's flag."""
    from clinieval.synth import generate
    from tests.helpers import renamed_tiny_tables

    import_snapshot(engine, generate(0, 0.005))
    rows = renamed_tiny_tables("raw-", 10_000_000)
    rows.pop("criteria")
    raw = snapshot_from_rows({**rows, "criteria": []})
    import_snapshot(engine, raw)
    export_snapshot(db.read_snapshot(engine), tmp_path / "e", salt="s")
    ids = read_bundle(tmp_path / "e")["raters"].column("rater_id").to_pylist()
    assert not [i for i in ids if i.startswith("raw-")]
    assert pseudonym("raw-rater-1", "s") in ids


def test_the_same_rating_cannot_be_appended_twice(engine):
    """Without a revision the rating is revision 0, so the database's
    uniqueness of (answer, rater, criterion, revision) refuses a repeat."""
    from clinieval.testing import tiny_tables

    import_snapshot(engine, tiny_snapshot())
    again = tiny_tables()["ratings"][0] | {"rating_id": 999}
    again.pop("revision")
    before = db.counts(engine)
    with pytest.raises(db.StorageError, match="table ratings"):
        import_snapshot(engine, snapshot_from_rows({"ratings": [again], "criteria": []}))
    assert db.counts(engine) == before


TRICKY = st.one_of(st.sampled_from(["007", " 2 ", "NA", "N/A", "null", "NULL", "nan", "1e3",
                                    "true", "a,b", 'say "hi"', "two\nlines", "\u2028", "-"]),
                   st.text(TEXT, min_size=1, max_size=12))
"""Strings a type-guessing CSV reader would change."""


@st.composite
def tricky_rows(draw):
    rows = tiny_tables()
    ids = draw(st.lists(TRICKY.filter(str.strip), min_size=2, max_size=2, unique=True))
    rename = {"rater-1": ids[0], "rater-2": ids[1]}
    for table in ("raters", "ratings", "preferences"):
        for row in rows[table]:
            row["rater_id"] = rename[row["rater_id"]]
    for row in rows["raters"]:
        row |= {"country": draw(st.one_of(st.none(), TRICKY)),
                "organisation": draw(st.one_of(st.none(), TRICKY, st.just(""))),
                "experience_years": draw(st.one_of(st.none(), st.integers(0, 80)))}
    for row in rows["answers"]:
        row |= {"text": draw(st.one_of(st.none(), st.just(""), TRICKY)),
                "latency_s": draw(st.one_of(st.none(), st.floats(0, 1e6))),
                "cost_usd": draw(st.one_of(st.none(), st.floats(0, 10)))}
    for row in rows["ratings"]:
        row["comment"] = draw(st.one_of(st.none(), st.just(""), TRICKY))
    return rows


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=tricky_rows(), fmt=st.sampled_from(["csv", "parquet"]))
def test_table_export_import_export_is_byte_identical(tmp_path_factory, rows, fmt):
    """Property: a database's export, imported into another database and
    exported again, has the same bytes in every table file: no string is
    type-guessed ("007" stays "007", "NA" is not null)."""
    work = tmp_path_factory.mktemp("csv")
    source = snapshot_from_rows(rows)
    for step in ("one", "two"):
        engine = db.make_engine(f"sqlite:///{work / step}.sqlite")
        db.upgrade(engine)
        import_snapshot(engine, source)
        export_snapshot(db.read_snapshot(engine), work / step, fmt=fmt, salt="x",
                        keep_rater_ids=True)
        engine.dispose()
        source = read_source(work / step)[0]
    for table in tabular.ALL:
        name = f"{table.name}.{fmt}"
        assert (work / "two" / name).read_bytes() == (work / "one" / name).read_bytes(), name


# Columns added to the contract after bundle files were already written.
LATER_COLUMNS = {"ratings": ["rubric_version"], "preferences": ["revision"]}


def _as_written_before_the_later_columns(folder) -> None:
    """Rewrite a bundle as the writer did before LATER_COLUMNS existed: the
    files lack them and every checksum covers only the columns written."""
    import hashlib

    import pyarrow.parquet as pq

    from clinieval.io.bundle import content_sha256, snapshot_checksum

    manifest = json.loads((folder / MANIFEST).read_text())
    for name, dropped in LATER_COLUMNS.items():
        path = folder / f"{name}.parquet"
        data = pq.read_table(path).drop_columns(dropped)
        pq.write_table(data, path)
        manifest["tables"][name].update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                                        content_sha256=content_sha256(
                                            data, tabular.BY_NAME[name].key))
    manifest["snapshot_sha256"] = snapshot_checksum(
        {k: v["content_sha256"] for k, v in manifest["tables"].items()})
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_a_bundle_written_before_later_columns_still_verifies_and_audits(tmp_path):
    from clinieval.audit.data import from_bundle

    write_bundle(tiny_snapshot(), tmp_path / "old")
    _as_written_before_the_later_columns(tmp_path / "old")
    back = read_bundle(tmp_path / "old")
    assert back["preferences"]["revision"].to_pylist() == [0] * back["preferences"].num_rows
    assert back["ratings"]["rubric_version"].null_count == back["ratings"].num_rows
    assert len(from_bundle(tmp_path / "old").pref_outcome) == back["preferences"].num_rows
    # An edited value is still caught by the content checksum (the file's own
    # SHA-256 is brought in step, as a careful forger would).
    import hashlib

    import pyarrow.parquet as pq

    path, manifest_path = tmp_path / "old" / "preferences.parquet", tmp_path / "old" / MANIFEST
    data = pq.read_table(path)
    pq.write_table(data.set_column(data.column_names.index("choice"), "choice",
                                   pa.array(["tie"] * data.num_rows)), path)
    manifest = json.loads(manifest_path.read_text())
    manifest["tables"]["preferences"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="content_sha256"):
        read_bundle(tmp_path / "old")
