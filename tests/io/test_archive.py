"""Zip archives as sources: the platform's export zip is read by
``clinieval audit``, ``import`` and ``info`` as its folder would be, and a
hostile archive gives an InputError naming it, writes nothing outside its
temporary folder and leaves nothing behind."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.errors import InputError
from clinieval.platform.study_export import export_zip
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_serve.py"

runner = CliRunner()


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """A study's export zip, as *Export* downloads it: the synthetic study at
    a fiftieth of MOOVE's size, seeded on the platform as the load benchmark
    does (with its ratings and votes)."""
    spec = importlib.util.spec_from_file_location("bench_serve", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    folder = tmp_path_factory.mktemp("export")
    url = f"sqlite:///{folder}/study.db"
    bench.seed(url, 0.02, 1)
    engine = db.make_engine(url)
    with engine.connect() as conn:
        admin, study = conn.execute(sa.select(platform_tables.memberships.c.user_id,
                                              platform_tables.memberships.c.study_id)
                                    .where(platform_tables.memberships.c.role == "admin")).one()
    path = folder / f"{study}-export.zip"
    path.write_bytes(export_zip(engine, admin, study))
    engine.dispose()
    return path


def _unzipped(archive: Path, into: Path) -> Path:
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(into)
    (bundle,) = [p for p in into.iterdir() if p.is_dir()]
    return bundle


def test_the_export_zip_reads_as_its_bundle_folder(export, tmp_path):
    from_zip, sources = read_source(export)
    from_folder, _ = read_source(_unzipped(export, tmp_path))
    assert set(from_zip.tables) == set(from_folder.tables)
    for name in from_folder.tables:
        assert from_zip[name].equals(from_folder[name]), name
    assert from_zip["ratings"].num_rows > 0
    # Each table's source names the archive, not the temporary folder it was read from.
    assert all(where.startswith(str(export)) for where in sources.values()), sources


def test_clinieval_audit_reads_the_export_zip(export, tmp_path):
    folder = _unzipped(export, tmp_path / "unzipped")
    for source, out in ((export, tmp_path / "from-zip"), (folder, tmp_path / "from-folder")):
        result = runner.invoke(app, ["audit", str(source), "--out", str(out)])
        assert result.exit_code == 0, result.output
    results = [json.loads((tmp_path / name / "results.json").read_text())
               for name in ("from-zip", "from-folder")]
    assert results[0] == results[1]  # every figure, setting and the snapshot's checksum
    info = runner.invoke(app, ["info", str(export)])
    assert info.exit_code == 0 and "ratings" in info.output, info.output


def _rezipped(export: Path, out: Path, change) -> Path:
    """``export`` with each member passed through ``change(name, data)``
    (returning the new name and data, or None to leave it out)."""
    with zipfile.ZipFile(export) as zf, zipfile.ZipFile(out, "w") as new:
        for info in zf.infolist():
            changed = change(info.filename, zf.read(info))
            if changed is not None:
                new.writestr(changed[0], changed[1])
    return out


def test_a_tampered_zipped_bundle_is_named_by_the_archive(export, tmp_path):
    def tamper(name: str, data: bytes):
        if name.endswith("ratings.parquet"):
            data = data[:-40] + bytes(40)
        return name, data

    archive = _rezipped(export, tmp_path / "tampered.zip", tamper)
    with pytest.raises(InputError) as err:
        read_source(archive)
    message = str(err.value)
    assert str(archive) in message and "ratings.parquet" in message, message
    assert "clinieval-zip-" not in message, message


def test_members_naming_paths_outside_stay_inside(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    target = tmp_path / "tmp" / "outside.csv"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../outside.csv", "case_id,prompt\nc1,hi\n")
        zf.writestr(str(tmp_path / "absolute.csv"), "x\n")
    archive = tmp_path / "evil.zip"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(InputError):
        read_source(archive)
    assert not target.exists() and not (tmp_path / "absolute.csv").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("name", [".", "./.", ".."])
def test_a_member_naming_the_folder_itself_is_refused_by_name(tmp_path, monkeypatch, name):
    """A file member named '.' (or what reduces to it) would be extracted over
    the folder being unpacked into, and reading that folder then raised
    NotADirectoryError (found by the upload fuzz test)."""
    from clinieval.platform.uploads import Upload, read_upload

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(name, "case_id,prompt\nc1,hi\n")
    archive = tmp_path / "dot.zip"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(InputError, match=f"member '{re.escape(name)}' names no file"):
        read_source(archive)
    with pytest.raises(InputError, match="names no file"):
        read_upload(Upload(filename="dot.zip", content=buffer.getvalue()))
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_archive_declaring_more_than_the_free_space_is_refused_before_unpacking(
        tmp_path, monkeypatch):
    """A forged directory (or a zip bomb) declaring 4 GiB per member: read from
    the command line, without the server's limits, it filled the disk before
    failing. Refused up front now, naming the archive, with nothing left behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        for i in range(2000):
            zf.writestr(f"cases-{i}.csv", "case_id,prompt\nc1,hi\n")
    data = bytearray(buffer.getvalue())
    start = data.find(b"PK\x01\x02")
    while start != -1:
        data[start + 24:start + 28] = (2**32 - 1).to_bytes(4, "little")  # uncompressed size
        start = data.find(b"PK\x01\x02", start + 4)
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(bytes(data))
    declared = sum(m.file_size for m in zipfile.ZipFile(archive).infolist())
    assert declared > shutil.disk_usage(tmp_path).free  # 8 TiB declared
    with pytest.raises(InputError) as err:
        read_source(archive)
    message = str(err.value)
    assert str(archive) in message and "free in the temporary folder" in message, message
    assert list((tmp_path / "tmp").iterdir()) == []
    result = CliRunner().invoke(app, ["audit", str(archive), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0 and "free in the temporary folder" in result.output, result.output
    assert not (tmp_path / "out").exists()


@st.composite
def _damaged(draw, export_bytes: bytes) -> bytes:
    """The export zip with a few bytes overwritten, cut short, or random bytes."""
    kind = draw(st.sampled_from(["flip", "cut", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=2000))
    data = bytearray(export_bytes)
    if kind == "cut":
        return bytes(data[:draw(st.integers(0, len(data) - 1))])
    for _ in range(draw(st.integers(1, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


def test_a_damaged_archive_is_an_input_error_and_leaves_nothing(export, tmp_path_factory):
    export_bytes = export.read_bytes()
    scratch = tmp_path_factory.mktemp("damaged")

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_damaged(export_bytes))
    def check(data: bytes) -> None:
        before = tempfile.tempdir
        tempfile.tempdir = str(scratch / "tmp")
        (scratch / "tmp").mkdir(exist_ok=True)
        archive = scratch / "damaged.zip"
        archive.write_bytes(data)
        try:
            read_source(archive)  # a flip inside a stored file's padding can leave it readable
        except InputError as err:
            assert "clinieval-zip-" not in str(err), str(err)
        finally:
            tempfile.tempdir = before
        assert list((scratch / "tmp").iterdir()) == []

    check()
