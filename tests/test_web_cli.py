"""The platform's commands through the CLI runner: study create, study
flagged, invite, study export, and serve --demo's set-up."""

from __future__ import annotations

import re

import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.bundle import read_bundle, write_bundle
from clinieval.storage import db
from clinieval.storage import platform_tables as P
from clinieval.web import auth
from clinieval.web.demo import DEMO_STUDY, setup_demo
from clinieval.web.testing import SELF_IDENTIFYING, blinding_source

runner = CliRunner()


def test_study_create_flagged_invite_and_export(db_url, tmp_path):
    source = tmp_path / "source"
    write_bundle(blinding_source(), source)
    r = runner.invoke(app, ["study", "create", "cardio", "--source", str(source),
                            "--specialties", "Pathology", "--overlap", "2",
                            "--database-url", db_url])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["study", "flagged", "cardio", "--database-url", db_url])
    assert r.exit_code == 0
    assert len([line for line in r.stdout.splitlines() if "\t" in line]) == len(SELF_IDENTIFYING)
    r = runner.invoke(app, ["invite", "cardio", "--role", "clinician", "--database-url", db_url])
    token = re.search(r"/invite/(\S+)", r.stdout).group(1)
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        assert auth.open_invitation(conn, token).role == "clinician"
    export = ["study", "export", "cardio", "--out", str(tmp_path / "export"),
              "--database-url", db_url]
    r = runner.invoke(app, export)
    assert r.exit_code == 0, r.output
    exported = read_bundle(tmp_path / "export")
    assert set(exported["cases"]["specialty"].to_pylist()) == {"Pathology"}
    assert exported["ratings"].num_rows == 0
    engine.dispose()


def test_bad_study_settings_name_the_option(db_url, tmp_path):
    source = tmp_path / "source"
    write_bundle(blinding_source(), source)
    for args, field in ((["--overlap", "0"], "overlap_target"),
                        (["--specialties", "Astrology"], "specialties")):
        r = runner.invoke(app, ["study", "create", "s1", "--source", str(source), *args,
                                "--database-url", db_url])
        assert r.exit_code == 2 and field in r.output
    r = runner.invoke(app, ["invite", "nope", "--database-url", db_url])
    assert r.exit_code == 2 and "no such study" in r.output


def test_demo_setup_is_repeatable(engine):
    first, second = setup_demo(engine), setup_demo(engine)
    assert first["clinician"] != second["clinician"]  # a fresh password each time
    with engine.connect() as conn:
        users = conn.execute(sa.select(sa.func.count()).select_from(P.users)).scalar_one()
        screens = conn.execute(sa.select(P.answer_screens.c.status).where(
            P.answer_screens.c.study_id == DEMO_STUDY)).scalars().all()
    assert users == 2 and screens and set(screens) == {"clear"}
