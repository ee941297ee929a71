"""The audit reads a bundle with the same guards as an import: files confined
to the bundle, checksums verified; and the same numbers whether the snapshot
comes from a bundle or a database."""

from __future__ import annotations

import json
import shutil

import pytest

from clinieval.audit import audit
from clinieval.demo import demo_bundle
from clinieval.errors import InputError
from clinieval.io.importer import import_snapshot
from clinieval.report.jsonout import dumps, results_document
from clinieval.sources import read_source
from clinieval.storage import db


@pytest.fixture
def bundle_copy(tmp_path):
    return shutil.copytree(demo_bundle(), tmp_path / "b")


def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_a_tampered_table_file_is_refused(bundle_copy):
    path = bundle_copy / _manifest(bundle_copy)["tables"]["ratings"]["file"]
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(InputError, match="SHA-256"):
        audit(bundle_copy, bootstrap=50)


def test_a_file_outside_the_bundle_is_refused(bundle_copy, tmp_path):
    manifest = _manifest(bundle_copy)
    outside = tmp_path / "ratings.parquet"
    shutil.move(bundle_copy / manifest["tables"]["ratings"]["file"], outside)
    (bundle_copy / manifest["tables"]["ratings"]["file"]).symlink_to(outside)
    with pytest.raises(InputError, match="symbolic link"):
        audit(bundle_copy, bootstrap=50)


def test_bundle_and_database_give_the_same_results(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    db.upgrade(engine)
    snapshot, sources = read_source(demo_bundle())
    import_snapshot(engine, snapshot, sources=sources)
    from_bundle = results_document(audit(demo_bundle(), bootstrap=50), {})
    from_db = results_document(audit(f"sqlite:///{tmp_path / 'a.db'}", bootstrap=50), {})
    assert dumps(from_bundle["sections"]) == dumps(from_db["sections"])
