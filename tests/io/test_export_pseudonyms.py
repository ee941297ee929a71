"""A study exported from the platform's database carries pseudonyms only.

The platform makes rater ids of the same form as export pseudonyms
(``r_`` + 16 hex digits); the export must still replace every stored id by
its salted pseudonym, the same one in every table, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import re
import zipfile

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from clinieval.io.bundle import write_bundle
from clinieval.io.export import export_snapshot, pseudonym
from clinieval.io.importer import import_snapshot
from clinieval.platform import membership
from clinieval.platform.study_export import export_salt, export_study
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.testing import snapshot_from_rows
from clinieval.web.testing import csrf_of, http_client, register_via_http
from tests.helpers import renamed_tiny_tables

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

RATER_TABLES = ("raters", "ratings", "preferences")


def _member(app, engine, role: str):
    c = http_client(app)
    register_via_http(c, engine, "x", role)
    return c


def _submit(c, kind: str) -> None:
    r = c.post("/s/x/next", data={"csrf": csrf_of(c.get("/studies").text), "kind": kind})
    url = r.headers["location"]
    assert "/t/" in url, url
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "20", "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1)}
    panels = ("1", "2") if 'name="s2.' in html else ("1",)
    criteria = sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html)))
    form.update({f"s{p}.{k}": "1" for p in panels for k in criteria})
    if len(panels) == 2:
        form["choice"] = "A"
    assert c.post(url, data=form).status_code == 303


def _import_a_pseudonymous_bundle(engine, folder) -> None:
    """Append an earlier pseudonymous export (ids of the pseudonym form) with
    ``clinieval import``: the database now claims pseudonymous rater ids, and
    keeps claiming it when the platform adds raters of its own."""
    rows = renamed_tiny_tables("old-", 10_000_000)
    for table in RATER_TABLES:
        for row in rows[table]:
            row["rater_id"] = pseudonym(row["rater_id"], "an earlier salt")
    write_bundle(snapshot_from_rows({**rows, "criteria": []}, {"rater_ids": "pseudonymous"}),
                 folder)
    import_snapshot(engine, read_source(folder)[0])
    assert db.read_snapshot(engine).meta["rater_ids"] == "pseudonymous"


def _stored_identifiers(engine) -> tuple[set[str], set[str], list[str]]:
    """The stored rater ids, those of platform accounts, and every rater id,
    user id and e-mail address."""
    with engine.connect() as conn:
        raters = set(conn.execute(sa.select(snapshot_tables.raters.c.rater_id)).scalars())
        users = conn.execute(sa.select(platform_tables.users.c.user_id,
                                       platform_tables.users.c.rater_id,
                                       platform_tables.users.c.email)).all()
    return (raters, {row.rater_id for row in users},
            sorted(raters | {v for row in users for v in row if v}))


def _files(zipped: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(zipped)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _table(name: str, data: bytes) -> pa.Table | None:
    if name.endswith(".parquet"):
        return pq.read_table(io.BytesIO(data))
    if name.endswith(".csv"):
        return pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
            column_types={"rater_id": pa.string()}))
    return None


def _texts(name: str, data: bytes) -> list[str]:
    """The file's bytes, and for Parquet (whose compression hides the raw
    bytes) every cell and the file's key-value metadata."""
    texts = [data.decode("latin-1")]
    if name.endswith(".parquet"):
        table = pq.read_table(io.BytesIO(data))
        texts += [str(v) for column in table.columns for v in column.to_pylist()
                  if v is not None]
        texts.append(str(pq.read_metadata(io.BytesIO(data)).metadata))
    return texts


def _exported_ids(files: dict[str, bytes]) -> dict[str, dict]:
    """Per rater table: row key -> exported rater id."""
    out = {}
    for name, data in files.items():
        stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        if stem in RATER_TABLES and (table := _table(name, data)) is not None:
            key = {"raters": "rater_id", "ratings": "rating_id",
                   "preferences": "preference_id"}[stem]
            out[stem] = dict(zip(table.column(key).to_pylist(),
                                 table.column("rater_id").to_pylist(), strict=True))
    return out


def _stored_by_row(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {"ratings": dict(conn.execute(sa.select(snapshot_tables.ratings.c.rating_id,
                                                       snapshot_tables.ratings.c.rater_id)).all()),
                "preferences": dict(conn.execute(sa.select(
                    snapshot_tables.preferences.c.preference_id,
                                                           snapshot_tables.preferences.c.rater_id)).all())}


def test_a_platform_export_holds_no_stored_id(app, engine, tmp_path):
    _import_a_pseudonymous_bundle(engine, tmp_path / "earlier")  # before any account
    clinicians = [_member(app, engine, "clinician") for _ in range(2)]
    for c in clinicians:
        _submit(c, "rating")
        _submit(c, "pair")
    admin = _member(app, engine, "admin")
    with engine.connect() as conn:
        admin_id = conn.execute(sa.select(platform_tables.memberships.c.user_id).where(
            platform_tables.memberships.c.study_id == "x",
            platform_tables.memberships.c.role == "admin")).scalar_one()
        first_rater = conn.execute(sa.select(platform_tables.users.c.rater_id).join(
            platform_tables.memberships).where(
            platform_tables.memberships.c.role == "clinician")).scalars().first()
    membership.revoke(engine, admin_id, "x", first_rater)  # the audit log names a rater
    token = membership.create_token(engine, admin_id, "x", "admin", "export")
    assert db.read_snapshot(engine).meta["rater_ids"] == "pseudonymous"  # a stale claim

    salt = export_salt(engine)
    browser = admin.post("/s/x/admin/export",
                         data={"csrf": csrf_of(admin.get("/s/x/progress").text)})
    api = http_client(app).get("/api/studies/x/export",
                               headers={"Authorization": f"Bearer {token}"})
    assert browser.status_code == api.status_code == 200
    export_study(engine, "x", tmp_path / "csv", salt=salt, fmt="csv")
    export_snapshot(db.read_snapshot(engine), tmp_path / "db", salt=salt)  # `clinieval export`
    exports = {"browser": _files(browser.content), "api": _files(api.content),
               **{name: {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()}
                  for name in ("csv", "db")}}

    rater_ids, accounts, identifiers = _stored_identifiers(engine)
    stored = _stored_by_row(engine)
    platform = {t: {k for k, r in rows.items() if r in accounts} for t, rows in stored.items()}
    assert len({stored["ratings"][k] for k in platform["ratings"]}) == 2
    assert platform["preferences"]
    assert all(re.fullmatch(r"r_[0-9a-f]{16}", r) for r in rater_ids)
    expected = {r: pseudonym(r, salt) for r in rater_ids}
    for label, files in exports.items():
        leaks = [(label, name, i) for name, data in files.items()
                 for text in _texts(name, data) for i in identifiers if i in text]
        assert leaks == []
        exported = _exported_ids(files)
        assert set(exported) == set(RATER_TABLES), (label, sorted(files))
        for table in ("ratings", "preferences"):  # the same rater, the same pseudonym
            assert platform[table] <= set(exported[table]), (label, table)
            rows = {k: expected[r] for k, r in stored[table].items() if k in exported[table]}
            assert exported[table] == rows, (label, table)
        used = {*exported["ratings"].values(), *exported["preferences"].values()}
        raters = set(exported["raters"].values())
        assert used <= raters <= set(expected.values()), label
    assert set(_exported_ids(exports["db"])["raters"].values()) == set(expected.values())
    assert _exported_ids(exports["browser"]) == _exported_ids(exports["api"])
