"""The platform's commands through the CLI runner: study create, study
flagged, invite, study export, study rubric, and serve --demo (its set-up,
and the real server printing one-time sign-in links)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.bundle import read_bundle, write_bundle
from clinieval.platform import (
    accounts,
)
from clinieval.platform.demo import DEMO_STUDY, setup_demo
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import SELF_IDENTIFYING, blinding_source, csrf_of, free_port
from tests.helpers import zipped_bundle

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
        assert accounts.open_invitation(conn, token).role == "clinician"
    export = ["study", "export", "cardio", "--out", str(tmp_path / "export"),
              "--database-url", db_url]
    r = runner.invoke(app, export)
    assert r.exit_code == 0, r.output
    exported = read_bundle(tmp_path / "export")
    assert set(exported["cases"]["specialty"].to_pylist()) == {"Pathology"}
    assert exported["ratings"].num_rows == 0
    engine.dispose()


def test_the_readme_five_steps_start_from_the_demo_source(db_url, tmp_path, monkeypatch):
    """`study create --source demo` (the README's first step): the bundled demo
    cases with stand-in answer texts, so the study has answers to rate; and
    the first admin's invitation, for their address, with the public address."""
    monkeypatch.chdir(tmp_path)  # no file or folder named demo here
    r = runner.invoke(app, ["study", "create", "cardio", "--source", "demo", "--specialties",
                            "Cardiology ECG", "--overlap", "3", "--database-url", db_url])
    assert r.exit_code == 0, r.output
    engine = db.make_engine(db_url)
    with engine.connect() as conn:
        clear = conn.execute(sa.select(sa.func.count()).select_from(platform_tables.answer_screens)
                             .where(
            platform_tables.answer_screens.c.study_id == "cardio",
            platform_tables.answer_screens.c.status == "clear")
        ).scalar_one()
    assert clear > 0
    r = runner.invoke(app, ["invite", "cardio", "--role", "admin", "--email", "Me@Example.org",
                            "--base-url", "https://ratings.example.org", "--database-url",
                            db_url])
    assert r.exit_code == 0, r.output
    token = re.fullmatch(r"https://ratings\.example\.org/invite/(\S+)\n", r.stdout).group(1)
    with engine.connect() as conn:
        invitation = accounts.open_invitation(conn, token)
    assert (invitation.role, invitation.email) == ("admin", "me@example.org")
    engine.dispose()


def test_invite_takes_one_e_mail_address(db_url, tmp_path):
    source = tmp_path / "source"
    write_bundle(blinding_source(), source)
    assert runner.invoke(app, ["study", "create", "s1", "--source", str(source),
                               "--database-url", db_url]).exit_code == 0
    for email in ("", "a@b.org c@d.org", "nope", "a\x00@b.org"):
        r = runner.invoke(app, ["invite", "s1", "--email", email, "--database-url", db_url])
        assert r.exit_code == 2 and "email" in r.output, (email, r.output)


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
    assert first["clinician"] != second["clinician"]  # a fresh sign-in link each time
    with engine.connect() as conn:
        users = conn.execute(sa.select(sa.func.count())
                             .select_from(platform_tables.users)).scalar_one()
        screens = conn.execute(sa.select(platform_tables.answer_screens.c.status).where(
            platform_tables.answer_screens.c.study_id == DEMO_STUDY)).scalars().all()
    assert users == 2 and screens and set(screens) == {"clear"}


@pytest.mark.parametrize("by", ["port", "fd"])
def test_serve_demo_prints_one_time_sign_in_links_not_passwords(tmp_path, by):
    """By --port, or by --fd on a socket bound here (the links name its port)."""
    log = tmp_path / "serve.log"
    cli = Path(sys.executable).with_name("clinieval")
    command = [str(cli), "serve", "--demo", "--database-url", f"sqlite:///{tmp_path / 'demo.db'}"]
    with socket.socket() as sock:
        if by == "fd":
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port, passed = sock.getsockname()[1], (sock.fileno(),)
            command += ["--fd", str(sock.fileno())]
        else:
            port, passed = free_port(), ()
            command += ["--port", str(port)]
        proc = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                pass_fds=passed)
    try:
        links = _printed_links(log, port)
        assert set(links) == {"demo clinician", "demo admin", "invitation for a new clinician"}
        assert "password" not in log.read_text().lower() and "@" not in log.read_text()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as browser:
            page = browser.get(links["demo admin"])
            r = browser.post(links["demo admin"], data={"csrf": csrf_of(page.text)})
            assert r.status_code == 303 and browser.get("/s/demo/progress").status_code == 200
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as someone_else:
            page = someone_else.get(links["demo admin"])
            assert page.status_code == 404 and "already been used" in page.text
    finally:
        proc.kill()
        proc.wait()


def test_serve_on_a_unix_socket_prints_links_with_host_and_port(tmp_path):
    """--fd on a Unix socket (behind a proxy): the links name --host and --port,
    not the first characters of the socket's path."""
    log, path = tmp_path / "serve.log", str(tmp_path / "clinieval.sock")
    cli = Path(sys.executable).with_name("clinieval")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path)
        sock.listen()
        proc = subprocess.Popen(
            [str(cli), "serve", "--demo", "--fd", str(sock.fileno()), "--host",
             "clinic.example.org", "--port", "8443",
             "--database-url", f"sqlite:///{tmp_path / 'demo.db'}"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, pass_fds=(sock.fileno(),))
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=path), base_url="http://x") as c:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if c.get("/login").status_code == 200:
                        break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
        links = re.findall(r"^[a-z ]+: (\S+)$", log.read_text(), re.MULTILINE)
        assert len(links) == 3 and all(x.startswith("http://clinic.example.org:8443/signin/")
                                       or x.startswith("http://clinic.example.org:8443/invite/")
                                       for x in links), log.read_text()
    finally:
        proc.kill()
        proc.wait()


def _printed_links(log: Path, port: int) -> dict[str, str]:
    deadline = time.monotonic() + 90  # a loaded 2-core machine imports slowly
    while time.monotonic() < deadline:
        found = dict(re.findall(rf"^([a-z ]+): http://127\.0\.0\.1:{port}(/\S+)$",
                                log.read_text(), re.MULTILINE))
        if len(found) == 3:
            try:
                httpx.get(f"http://127.0.0.1:{port}/login", timeout=1)
                return found
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"serve --demo printed no links: {log.read_text()[-2000:]}")


def test_study_rubric_sets_a_new_version_once(db_url, engine, tmp_path):
    from clinieval.rubric import load_rubric, rubric_to_dict
    from clinieval.web.testing import make_studies

    make_studies(engine)
    path = tmp_path / "rubric-v2.json"
    path.write_text(json.dumps({**rubric_to_dict(load_rubric()), "version": "2.0.0"}))
    args = ["study", "rubric", "x", str(path), "--database-url", db_url]
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and "2.0.0" in r.output, r.output
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "already used" in r.output
    with engine.connect() as conn:
        versions = dict(conn.execute(sa.select(platform_tables.study_rubrics.c.study_id,
                                               platform_tables.study_rubrics.c.version)).all())
    assert versions == {"x": "2.0.0", "y": load_rubric().version}


def _readme_api_example() -> str:
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if "/api/studies" in b]
    return block


def test_the_readmes_api_example_runs_against_the_server(db_url, tmp_path, monkeypatch):
    """The README's httpx example, as printed, against a real server: only its
    address and token are filled in. It creates the study, adds cases, invites,
    reads progress and downloads the export, which `clinieval audit` reads."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from clinieval.platform import (
        events,
        membership,
    )
    from clinieval.platform.demo import demo_source
    from clinieval.snapshot import Snapshot
    from clinieval.storage.schema import snapshot as snapshot_tables
    from clinieval.web.testing import served_studies

    source = demo_source()
    cases = source["cases"].filter(pc.equal(source["cases"]["specialty"], "Cardiology ECG"))
    cases = cases.set_column(cases.schema.get_field_index("specialty"), "specialty",
                             pa.array(["Cardiology"] * cases.num_rows))
    half = cases.num_rows // 2
    for name, part in (("cases", cases.slice(0, half)), ("more-cases", cases.slice(half))):
        answers = source["answers"].filter(pc.is_in(source["answers"]["case_id"],
                                                    part["case_id"]))
        (tmp_path / f"{name}.zip").write_bytes(zipped_bundle(Snapshot.from_tables(
            {**source.tables, "cases": part, "answers": answers, "ratings": None,
             "preferences": None, "judgments": None, "raters": None}, source.meta),
            tmp_path, name))
    with served_studies(db_url, tmp_path) as (engine, base):
        with engine.connect() as conn:
            owner = conn.execute(sa.select(platform_tables.memberships.c.user_id)
                                 .where(platform_tables.memberships.c.role == "admin")).scalar()
        if owner is None:  # the test studies have no admin yet: one of study x
            owner = "u_readme"
            with engine.begin() as conn:
                conn.execute(snapshot_tables.raters.insert().values(rater_id="r_readme"))
                conn.execute(platform_tables.users.insert().values(
                    user_id=owner, email="readme@example.org", rater_id="r_readme",
                    password_hash="not-a-login", created_at=events.now()))
                conn.execute(platform_tables.memberships.insert().values(study_id="x",
                                                                         user_id=owner,
                                                           role="admin"))
        token = membership.create_token(engine, owner, None, "admin", "readme")
        code = _readme_api_example().replace('"http://127.0.0.1:8000"', repr(base))
        assert "ce_..." in code
        code = code.replace("ce_...", token)
        monkeypatch.chdir(tmp_path)
        exec(compile(code, "README.md", "exec"), {})
        with engine.connect() as conn:
            stored = conn.execute(sa.select(sa.func.count()).select_from(snapshot_tables.cases)
                                  .where(
                snapshot_tables.cases.c.study_id == "cardio")).scalar_one()
            invited = conn.execute(sa.select(sa.func.count())
                                   .select_from(platform_tables.invitations)
                                   .where(platform_tables.invitations.c.study_id
                                          == "cardio")).scalar_one()
        assert (stored, invited) == (cases.num_rows, 2)
    r = runner.invoke(app, ["audit", str(tmp_path / "cardio-export.zip"), "--out",
                            str(tmp_path / "report")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "report" / "report.html").exists()


def _study_rows(engine, study: str) -> dict[str, int]:
    from clinieval.storage.schema import snapshot as snapshot_tables

    tables = {"studies": snapshot_tables.studies, "cases": snapshot_tables.cases,
              "study_settings": platform_tables.study_settings,
              "answer_screens": platform_tables.answer_screens}
    with engine.connect() as conn:
        return {name: conn.execute(sa.select(sa.func.count()).select_from(t).where(
            t.c.study_id == study)).scalar_one() for name, t in tables.items()}


def test_study_create_takes_the_assignment_options(db_url, tmp_path):
    """The options of `study assignment`: stored with the study; created
    targeted, every clear answer has its first pick key when the command ends."""
    from clinieval.platform.config import study_config

    source = tmp_path / "source"
    write_bundle(blinding_source(), source)
    r = runner.invoke(app, ["study", "create", "t1", "--source", str(source),
                            "--specialties", "Pathology", "--assignment", "targeted",
                            "--monitor-share", "0.25", "--escalation-step", "1",
                            "--escalation-cap", "3",
                            "--database-url", db_url])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["study", "create", "e1", "--source", str(source),
                            "--specialties", "Pulmonology", "--database-url", db_url])
    assert r.exit_code == 0, r.output
    engine = db.make_engine(db_url)
    ap, screens = platform_tables.answer_priorities, platform_tables.answer_screens
    with engine.connect() as conn:
        assert study_config(conn, "t1").assignment_settings() == {
            "assignment": "targeted", "monitor_share": 0.25, "escalation_step": 1,
            "escalation_cap": 3}
        assert study_config(conn, "e1").assignment_settings() == {
            "assignment": "even", "monitor_share": 0.1, "escalation_step": 2,
            "escalation_cap": 4}
        keyed = {s: conn.execute(sa.select(sa.func.count()).where(
            ap.c.study_id == s, ap.c.pick_key.is_not(None))).scalar_one() for s in ("t1", "e1")}
        clear = conn.execute(sa.select(sa.func.count()).where(
            screens.c.study_id == "t1", screens.c.status == "clear")).scalar_one()
    assert keyed == {"t1": clear, "e1": 0} and clear > 0
    engine.dispose()


@pytest.mark.parametrize(("option", "value", "field"), [
    ("--assignment", "random", "assignment"), ("--monitor-share", "1", "monitor_share"),
    ("--monitor-share", "nan", "monitor_share"), ("--escalation-step", "21", "escalation_step"),
    ("--escalation-cap", "-1", "escalation_cap")])
def test_a_bad_assignment_option_names_it_and_creates_nothing(db_url, tmp_path, option, value,
                                                              field):
    source = tmp_path / "source"
    write_bundle(blinding_source(), source)
    assert runner.invoke(app, ["study", "create", "s0", "--source", str(source),
                               "--database-url", db_url]).exit_code == 0
    r = runner.invoke(app, ["study", "create", "s1", "--source", str(source),
                            "--assignment", "targeted", option, value, "--database-url", db_url])
    assert r.exit_code == 2, r.output
    assert f"study create, field '{field}'" in r.output and "Traceback" not in r.output
    engine = db.make_engine(db_url)
    assert set(_study_rows(engine, "s1").values()) == {0}
    assert set(_study_rows(engine, "s0").values()) != {0}
    engine.dispose()
