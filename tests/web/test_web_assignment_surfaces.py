"""How a study assigns (even or targeted, monitoring share, escalation step
and cap), changed from the three places a study lead works, on SQLite and
PostgreSQL: ``clinieval study assignment``, the JSON API and the form on the
admin's *Cases & rubric* page. Each prints or returns the settings in force;
a bad value is refused naming its field and nothing is written."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.cli import app as cli
from clinieval.platform import membership
from clinieval.platform.config import study_config
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import csrf_of
from tests.web.test_web_admin import client, signed_in

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

runner = CliRunner()
DEFAULTS = {"assignment": "even", "monitor_share": 0.1, "escalation_step": 2,
            "escalation_cap": 4}


def _settings(engine, study: str = "x") -> dict:
    with engine.connect() as conn:
        return study_config(conn, study).assignment_settings()


def _set_events(engine) -> int:
    e = platform_tables.audit_events
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(e.c.kind == "assignment_set")
                            ).scalar_one()


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _printed(output: str) -> dict:
    return dict(line.split("\t") for line in output.strip().splitlines())


# --- the command ---------------------------------------------------------------------

def test_the_command_prints_the_settings_in_force_and_changes_only_those_given(app, engine):
    r = runner.invoke(cli, ["study", "assignment", "x", "--database-url", _url(engine)])
    assert r.exit_code == 0, r.output
    assert _printed(r.stdout) == {k: str(v) for k, v in DEFAULTS.items()}
    assert _set_events(engine) == 0  # asking writes nothing
    r = runner.invoke(cli, ["study", "assignment", "x", "--assignment", "targeted",
                            "--monitor-share", "0.25", "--database-url", _url(engine)])
    assert r.exit_code == 0, r.output
    expected = {**DEFAULTS, "assignment": "targeted", "monitor_share": 0.25}
    assert _printed(r.stdout) == {k: str(v) for k, v in expected.items()}
    assert _settings(engine) == expected and _settings(engine, "y") == DEFAULTS
    r = runner.invoke(cli, ["study", "assignment", "x", "--escalation-cap", "6",
                            "--database-url", _url(engine)])
    assert r.exit_code == 0 and _settings(engine) == {**expected, "escalation_cap": 6}
    assert _set_events(engine) == 2


@pytest.mark.parametrize(("option", "value", "field"), [
    ("--monitor-share", "1", "monitor_share"), ("--monitor-share", "-0.1", "monitor_share"),
    ("--monitor-share", "nan", "monitor_share"), ("--escalation-step", "21", "escalation_step"),
    ("--escalation-cap", "-1", "escalation_cap"), ("--assignment", "random", "assignment")])
def test_the_command_refuses_a_bad_value_naming_it_and_writes_nothing(app, engine, option,
                                                                       value, field):
    r = runner.invoke(cli, ["study", "assignment", "x", "--assignment", "targeted",
                            option, value, "--database-url", _url(engine)])
    assert r.exit_code == 2, r.output
    assert f"'{field}'" in r.output and "Traceback" not in r.output
    assert _settings(engine) == DEFAULTS and _set_events(engine) == 0


def test_the_command_names_a_missing_study(app, engine):
    r = runner.invoke(cli, ["study", "assignment", "nope", "--assignment", "targeted",
                            "--database-url", _url(engine)])
    assert r.exit_code == 2 and "no such study" in r.output


def test_every_study_command_has_help_with_an_example():
    from clinieval.cli.web import study_app

    for command in study_app.registered_commands:
        r = runner.invoke(cli, ["study", command.name, "--help"])
        assert r.exit_code == 0 and "Example" in r.output, command.name


# --- the API -------------------------------------------------------------------------

def _token_client(app, engine, role: str = "admin"):
    _, uid = signed_in(app, engine, "x", role)
    return client(app, membership.create_token(engine, uid, "x", role, "t"))


def test_the_api_reads_and_changes_the_settings(app, engine):
    api = _token_client(app, engine)
    assert api.get("/api/studies/x/assignment").json() == DEFAULTS
    r = api.post("/api/studies/x/assignment", json={"assignment": "targeted",
                                                    "escalation_step": 3})
    assert r.status_code == 200, r.text
    expected = {**DEFAULTS, "assignment": "targeted", "escalation_step": 3}
    assert r.json() == expected and _settings(engine) == expected
    assert api.get("/api/studies/x/assignment").json() == expected


@pytest.mark.parametrize(("body", "field"), [
    ({"monitor_share": 1.5}, "monitor_share"), ({"assignment": "random"}, "assignment"),
    ({"assignment": "targeted", "escalation_cap": 51}, "escalation_cap"),
    ({}, "assignment")])
def test_the_api_refuses_a_bad_value_naming_it_and_writes_nothing(app, engine, body, field):
    r = _token_client(app, engine).post("/api/studies/x/assignment", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    assert _settings(engine) == DEFAULTS and _set_events(engine) == 0


def test_the_api_refuses_an_unknown_field_or_a_wrong_type(app, engine):
    api = _token_client(app, engine)
    for body, field in (({"monitor_shar": 0.2}, "monitor_shar"),
                        ({"escalation_step": "two"}, "escalation_step")):
        r = api.post("/api/studies/x/assignment", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == field
    assert _settings(engine) == DEFAULTS


def test_only_the_studys_admin_changes_the_settings_over_the_api(app, engine):
    viewer = _token_client(app, engine, "viewer")
    assert viewer.post("/api/studies/x/assignment",
                       json={"assignment": "targeted"}).status_code == 403
    assert viewer.get("/api/studies/x/assignment").status_code == 403
    _, y_admin = signed_in(app, engine, "y", "admin")
    other = client(app, membership.create_token(engine, y_admin, "y", "admin", "y"))
    assert other.post("/api/studies/x/assignment",
                      json={"assignment": "targeted"}).status_code == 403
    assert _settings(engine) == DEFAULTS


# --- the admin page ------------------------------------------------------------------

def _form(c, **fields) -> dict:
    page = c.get("/s/x/admin/content")
    assert page.status_code == 200 and 'id="assignment-form"' in page.text
    return {"csrf": csrf_of(page.text), **fields}


def test_the_admin_page_shows_and_changes_the_settings(app, engine):
    admin, _ = signed_in(app, engine, "x", "admin")
    page = admin.get("/s/x/admin/content").text
    assert '<option value="even" selected>' in page and 'value="0.1"' in page
    r = admin.post("/s/x/admin/assignment", data=_form(
        admin, assignment="targeted", monitor_share="0.2", escalation_step="",
        escalation_cap="5"))
    assert r.status_code == 200 and 'id="assignment-saved"' in r.text
    expected = {**DEFAULTS, "assignment": "targeted", "monitor_share": 0.2,
                "escalation_cap": 5}
    assert _settings(engine) == expected
    assert '<option value="targeted" selected>' in r.text and 'value="0.2"' in r.text
    assert '<option value="targeted" selected>' in admin.get("/s/x/admin/content").text


@pytest.mark.parametrize(("fields", "field"), [
    ({"monitor_share": "a tenth"}, "monitor_share"), ({"escalation_step": "2.5"},
                                                      "escalation_step"),
    ({"monitor_share": "1"}, "monitor_share"), ({"assignment": "random"}, "assignment"),
    ({"monitor_shares": "0.2"}, "monitor_shares")])
def test_the_admin_page_refuses_a_bad_value_naming_it_and_writes_nothing(app, engine, fields,
                                                                         field):
    admin, _ = signed_in(app, engine, "x", "admin")
    r = admin.post("/s/x/admin/assignment", data=_form(admin, **{"assignment": "targeted",
                                                                      **fields}))
    assert r.status_code == 422 and f"field &#39;{field}&#39;" in r.text, r.text[-2000:]
    assert 'id="assignment-saved"' not in r.text
    assert _settings(engine) == DEFAULTS and _set_events(engine) == 0


def test_the_admin_form_needs_its_csrf_token_and_the_admin_role(app, engine):
    admin, _ = signed_in(app, engine, "x", "admin")
    r = admin.post("/s/x/admin/assignment", data={"assignment": "targeted", "csrf": "forged"})
    assert r.status_code == 403
    for role in ("viewer", "clinician", "adjudicator"):
        c, _ = signed_in(app, engine, "x", role)
        page = c.get("/studies")
        r = c.post("/s/x/admin/assignment", data={"assignment": "targeted",
                                                  "csrf": csrf_of(page.text)})
        assert r.status_code == 403, role
    assert _settings(engine) == DEFAULTS and _set_events(engine) == 0
