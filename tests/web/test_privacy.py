"""Exports leak no raw rater id, refuse the public salt, and can drop quasi-identifiers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.bundle import read_bundle, write_bundle
from clinieval.io.export import export_snapshot, pseudonym
from clinieval.io.importer import import_snapshot
from clinieval.snapshot import Snapshot
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.testing import snapshot_from_rows, tiny_tables

runner = CliRunner()
MOOVE = Path(__file__).parents[1] / "data" / "formats" / "moove_export.json"
EMAIL = "dr.alice@example.org"  # a rater id in the MOOVE fixture


def _strings(path: Path) -> list[str]:
    """Every string an exported file holds: its text, or every Parquet cell and
    the file's metadata (compression hides raw bytes, so read the values)."""
    if path.suffix != ".parquet":
        return [path.read_text("utf-8")]
    data = pq.read_table(path)
    cells = [str(v) for column in data.columns for v in column.to_pylist() if v is not None]
    return [*cells, str(pq.read_metadata(path).metadata)]


def _leaks(folder: Path, raw_ids: list[str]) -> list[tuple[str, str]]:
    return [(path.name, raw) for path in sorted(folder.rglob("*")) if path.is_file()
            for text in _strings(path) for raw in raw_ids if raw in text]


@pytest.fixture
def stored(engine):
    """A database holding a MOOVE import whose metadata quotes a raw rater id,
    as notes of older versions did."""
    snap, sources = read_source(MOOVE)
    snap.meta["notes"] = [*snap.meta["notes"], f"rater {EMAIL} had conflicting countries"]
    import_snapshot(engine, snap, sources=sources)
    return db.read_snapshot(engine)


@pytest.mark.parametrize("fmt", ["bundle", "csv", "parquet"])
def test_no_export_file_holds_a_raw_rater_id(stored, tmp_path, fmt):
    raw_ids = stored["raters"].column("rater_id").to_pylist()
    assert EMAIL in raw_ids and any(EMAIL in note for note in stored.meta["notes"])
    export_snapshot(stored, tmp_path / "out", fmt=fmt, salt="s3cret")
    assert list((tmp_path / "out").iterdir())
    assert _leaks(tmp_path / "out", raw_ids) == []
    if fmt == "bundle":
        notes = read_bundle(tmp_path / "out").meta["notes"]
        assert any(pseudonym(EMAIL, "s3cret") in note for note in notes)


def test_a_claim_of_pseudonymous_ids_is_not_trusted(engine, tmp_path):
    """A bundle whose manifest says its ids are pseudonymous but holds raw ones."""
    rows = tiny_tables()
    rows["raters"][0]["rater_id"] = EMAIL
    for table in ("ratings", "preferences"):
        for row in rows[table]:
            row["rater_id"] = EMAIL if row["rater_id"] == "rater-1" else row["rater_id"]
    write_bundle(snapshot_from_rows(rows, {"rater_ids": "pseudonymous"}), tmp_path / "claim")
    import_snapshot(engine, read_source(tmp_path / "claim")[0])
    export_snapshot(db.read_snapshot(engine), tmp_path / "out", salt="s")
    ids = set(read_bundle(tmp_path / "out")["raters"].column("rater_id").to_pylist())
    assert ids == {pseudonym(EMAIL, "s"), pseudonym("rater-2", "s")}


def test_pseudonyms_are_kept_on_re_export(tmp_path):
    """Re-exporting an export does not hash the pseudonyms again."""
    export_snapshot(snapshot_from_rows(tiny_tables()), tmp_path / "one", salt="s")
    once = read_bundle(tmp_path / "one")
    export_snapshot(once, tmp_path / "two", salt="other")
    assert read_bundle(tmp_path / "two")["raters"].equals(once["raters"])


def test_the_default_salt_is_refused_unless_allowed(engine, db_url, tmp_path):
    import_snapshot(engine, snapshot_from_rows(tiny_tables()))
    args = ["export", "--out", str(tmp_path / "e"), "--database-url", db_url]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    message = " ".join(refused.output.split())
    assert "CLINIEVAL_PSEUDONYM_SALT" in message and "--allow-default-salt" in message
    assert not (tmp_path / "e").exists()
    allowed = runner.invoke(app, [*args, "--allow-default-salt"])
    assert allowed.exit_code == 0, allowed.output


def test_keep_rater_ids_warns(engine, db_url, tmp_path):
    import_snapshot(engine, snapshot_from_rows(tiny_tables()))
    result = runner.invoke(app, ["export", "--out", str(tmp_path / "e"), "--database-url", db_url,
                                 "--keep-rater-ids"])
    assert result.exit_code == 0, result.output
    assert "warning" in result.output and "identifies raters" in " ".join(result.output.split())
    assert read_bundle(tmp_path / "e").meta["rater_ids"] == "raw"


def test_drop_quasi_identifiers(tmp_path):
    rows = tiny_tables()
    rows["raters"][0] |= {"country": "NA", "organisation": "CHUV", "experience_years": 12}
    rows["ratings"][0] |= {"comment": "I saw this at my clinic in Lausanne",
                           "created_at": datetime(2025, 3, 1, 17, 42, 5, tzinfo=UTC)}
    snap = snapshot_from_rows(rows)
    export_snapshot(snap, tmp_path / "e", salt="s", quasi_identifiers=False)
    out = read_bundle(tmp_path / "e")
    for column in ("country", "organisation", "experience_years"):
        assert out["raters"].column(column).null_count == out["raters"].num_rows, column
    assert out["ratings"].column("comment").null_count == out["ratings"].num_rows
    stamps = out["ratings"].column("created_at").to_pylist()
    assert stamps[0] == datetime(2025, 3, 1, tzinfo=UTC)
    assert all(s.hour == s.minute == s.second == s.microsecond == 0 for s in stamps)
    assert out.meta["quasi_identifiers"] == "dropped"
    assert out["raters"].column("specialty").to_pylist() == ["Cardiology", "Pathology"]


def test_quasi_identifiers_are_kept_by_default(tmp_path):
    rows = tiny_tables()
    rows["raters"][0] |= {"country": "NA", "organisation": "CHUV"}
    export_snapshot(Snapshot.from_tables(snapshot_from_rows(rows).tables), tmp_path / "e",
                    salt="s")
    assert read_bundle(tmp_path / "e")["raters"].column("country").to_pylist()[0] == "NA"


def test_unknown_export_format_is_one_line(engine, db_url, tmp_path):
    result = runner.invoke(app, ["export", "--out", str(tmp_path / "e"), "--database-url", db_url,
                                 "--format", "zip", "--allow-default-salt"])
    assert result.exit_code == 2
    assert "unknown export format 'zip'" in result.output and "Traceback" not in result.output
