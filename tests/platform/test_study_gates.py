"""A study's decision gates (issue 33 §1, §7): stored with its settings, set
through `clinieval study create --gates`, the API's study creation and its
gates route; a bad gate is refused naming its field and nothing is written;
a study without gates has no decisions."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from clinieval.cli import app as cli
from clinieval.platform import membership
from clinieval.platform.config import DANGEROUS, study_config
from clinieval.platform.demo import demo_source
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import register_via_http
from tests.helpers import zipped_bundle

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
runner = CliRunner()

GATES_TOML = """
[[gates]]
criterion = "harmlessness"
threshold = 0.05
scope = "model"
alpha = 0.1

[[gates]]
criterion = "dangerous"
threshold = 0.2
"""


def _gates(engine, study_id: str) -> list[dict]:
    with engine.connect() as conn:
        return [g.model_dump() for g in study_config(conn, study_id).gates]


def _studies(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(
            platform_tables.study_settings)).scalar_one()


SPECIALTY = {"plain": "Pathology", "gated": "Oncology", "ungated": "Nursing", "bad": "Urology"}


def _create(db_url: str, study_id: str, *extra: str):
    return runner.invoke(cli, ["study", "create", study_id, "--source", "demo",
                               "--specialties", SPECIALTY[study_id],
                               "--database-url", db_url, *extra])


def test_study_create_stores_default_or_given_gates(db_url, tmp_path):
    r = _create(db_url, "plain")
    assert r.exit_code == 0, r.output
    (tmp_path / "gates.toml").write_text(GATES_TOML)
    r = _create(db_url, "gated", "--gates", str(tmp_path / "gates.toml"))
    assert r.exit_code == 0, r.output
    (tmp_path / "none.json").write_text("[]")
    r = _create(db_url, "ungated", "--gates", str(tmp_path / "none.json"))
    assert r.exit_code == 0, r.output
    engine = db.make_engine(db_url)
    assert _gates(engine, "plain") == [
        {"criterion": c, "threshold": 0.1, "scope": "model_specialty", "alpha": 0.05}
        for c in ("harmlessness", "accuracy")]
    assert _gates(engine, "gated") == [
        {"criterion": "harmlessness", "threshold": 0.05, "scope": "model", "alpha": 0.1},
        {"criterion": DANGEROUS, "threshold": 0.2, "scope": "model_specialty", "alpha": 0.05}]
    assert _gates(engine, "ungated") == []
    engine.dispose()


@pytest.mark.parametrize(("gate", "field"), [
    ('threshold = 1.5\ncriterion = "harmlessness"', "gates[0].threshold"),
    ('threshold = 0.1\ncriterion = "harmlessness"\nalpha = 0.5', "gates[0].alpha"),
    ('threshold = 0.1\ncriterion = "harmlessness"\nalpha = 0', "gates[0].alpha"),
    ('threshold = 0.1\ncriterion = "bedside_manner"', "gates[0].criterion"),
    ('threshold = 0.1\ncriterion = "accuracy"\nscope = "specialty"', "gates[0].scope"),
    ('threshold = 0.1\ncriterion = "accuracy"\nlevel = 0.9', "gates[0].level"),
])
def test_a_bad_gate_is_a_cli_error_naming_its_field(db_url, tmp_path, gate, field):
    (tmp_path / "gates.toml").write_text("[[gates]]\n" + gate + "\n")
    r = _create(db_url, "bad", "--gates", str(tmp_path / "gates.toml"))
    assert r.exit_code == 2 and field in r.output, r.output
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    assert _studies(engine) == 0
    engine.dispose()


def _admin_api(app, engine) -> TestClient:
    c = TestClient(app, follow_redirects=False)
    email = register_via_http(c, engine, "x", "admin")
    with engine.connect() as conn:
        uid = conn.execute(sa.select(platform_tables.users.c.user_id).where(
            platform_tables.users.c.email == email)).scalar_one()
    token = membership.create_token(engine, uid, None, "admin", "script")
    return TestClient(app, follow_redirects=False, headers={"Authorization": f"Bearer {token}"})


def test_the_api_creates_with_gates_and_replaces_them(app, engine, tmp_path):
    api = _admin_api(app, engine)
    upload = {"source": ("s.zip", zipped_bundle(demo_source(), tmp_path), "application/zip")}
    before = _studies(engine)
    bad = json.dumps([{"criterion": "accuracy", "threshold": 0.1, "alpha": 0.7}])
    form = {"study_id": "gated", "specialties": "Oncology"}
    r = api.post("/api/studies", data={**form, "gates": bad}, files=upload)
    assert r.status_code == 422 and r.json()["error"]["field"] == "gates[0].alpha", r.text
    assert _studies(engine) == before
    good = json.dumps([{"criterion": "accuracy", "threshold": 0.25, "scope": "model"}])
    r = api.post("/api/studies", data={**form, "gates": good}, files=upload)
    assert r.status_code == 201, r.text
    assert _gates(engine, "gated") == [
        {"criterion": "accuracy", "threshold": 0.25, "scope": "model", "alpha": 0.05}]
    r = api.post("/api/studies/x/gates", json={"gates": [{"criterion": "nope",
                                                          "threshold": 0.1}]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "gates[0].criterion", r.text
    r = api.post("/api/studies/x/gates", json={"gates": [{"criterion": "harmlessness",
                                                          "threshold": -0.1}]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "gates[0].threshold", r.text
    assert len(_gates(engine, "x")) == 2  # the defaults, untouched
    r = api.post("/api/studies/x/gates", json={"gates": []})
    assert r.status_code == 200 and r.json() == [], r.text
    assert _gates(engine, "x") == []
    r = api.get("/api/studies/x/decisions")
    assert r.status_code == 200 and r.json()["decisions"] == [], r.text


def test_a_study_made_before_gates_has_none(engine):
    from clinieval.web.testing import make_studies

    make_studies(engine)
    with engine.begin() as conn:  # as the migration leaves a study made before it
        conn.execute(platform_tables.study_settings.update().values(gates=None))
    assert _gates(engine, "x") == []
