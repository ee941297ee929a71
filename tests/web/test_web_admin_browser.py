"""The admin flow in a real browser (Playwright driving Debian's chromium)
against a real ``clinieval serve`` process, on SQLite and PostgreSQL: create
a study from an uploaded file, add more cases later (a bad file adds
nothing) and a new rubric version, invite two clinicians, watch progress
move as they rate (over real HTTP), release a flagged answer, export, open
the report. (The README's pictures of these pages come from docs/screenshots.py,
on a larger study.)"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from clinieval.io.bundle import write_bundle
from clinieval.platform import (
    accounts,
)
from clinieval.rubric import load_rubric, rubric_to_dict
from clinieval.snapshot import Snapshot
from clinieval.web.testing import (
    SELF_IDENTIFYING,
    csrf_of,
    register_in_browser,
    served_studies,
)
from tests.web.test_web_admin import NEW_SPECIALTY, new_source
from tests.web.test_web_browser import ARGS, CHROMIUM

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (.ci/setup-browser.sh)")


def _source_zip(tmp_path: Path) -> Path:
    """The new-specialty source with one answer that names its maker."""
    snap = new_source()
    texts = snap["answers"]["text"].to_pylist()
    texts[0] = SELF_IDENTIFYING[0]
    answers = snap["answers"].set_column(snap["answers"].schema.get_field_index("text"),
                                         "text", pa.array(texts))
    write_bundle(Snapshot.from_tables({**snap.tables, "answers": answers}, snap.meta),
                 tmp_path / "cases")
    path = tmp_path / "cases.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for f in (tmp_path / "cases").rglob("*"):
            zf.write(f, f.relative_to(tmp_path).as_posix())
    return path


def _more_cases_zip(tmp_path: Path, prefix: str, broken: bool = False) -> Path:
    """The same specialty's cases under new ids (``broken``: one answer names
    a case that does not exist)."""
    snap = new_source()

    def renamed(table: pa.Table, column: str) -> pa.Table:
        ids = pc.binary_join_element_wise(prefix, table[column], "")
        return table.set_column(table.schema.get_field_index(column), column, ids)

    answers = renamed(renamed(snap["answers"], "answer_id"), "case_id")
    if broken:
        case_ids = answers["case_id"].to_pylist()
        case_ids[1] = "no-such-case"
        answers = answers.set_column(answers.schema.get_field_index("case_id"), "case_id",
                                     pa.array(case_ids))
    folder = tmp_path / prefix
    write_bundle(Snapshot.from_tables({**snap.tables, "cases": renamed(snap["cases"], "case_id"),
                                       "answers": answers}, snap.meta), folder / "cases")
    path = tmp_path / f"{prefix}.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for f in (folder / "cases").rglob("*"):
            zf.write(f, f.relative_to(folder).as_posix())
    return path


def _clinician(base: str, link: str, email: str) -> httpx.Client:
    c = httpx.Client(base_url=base, follow_redirects=False, timeout=30)
    page = c.get(link)
    pw = "correct horse battery"
    r = c.post(link, data={"csrf": csrf_of(page.text), "email": email, "password": pw,
                           "password2": pw})
    assert r.status_code == 303, r.text
    study = r.headers["location"].split("/")[2]
    profile = c.get(f"/s/{study}/profile")
    r = c.post(f"/s/{study}/profile", data={
        "csrf": csrf_of(profile.text), "specialty": NEW_SPECIALTY, "country": "Peru",
        "organisation": "Hospital", "experience_years": "4", "role": "specialist",
        "consent": "yes"})
    assert r.status_code == 303, r.text
    return c


def _rate_one(c: httpx.Client, study: str) -> None:
    home = c.get(f"/s/{study}")
    r = c.post(f"/s/{study}/next", data={"csrf": csrf_of(home.text), "kind": "rating"})
    url = r.headers["location"]
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "45", "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1)}
    form |= {f"s1.{k}": "1" for k in set(re.findall(r'name="s1\.([a-z_]+)"', html))}
    assert c.post(url, data=form).status_code == 303


def _figure(page, selector: str) -> int:
    return int(page.locator(selector).inner_text())


def test_admin_flow_in_a_browser(db_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    source = _source_zip(tmp_path)
    with served_studies(db_url, tmp_path) as (engine, base):
        invitation = accounts.create_invitation(engine, "x", "admin")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900},
                                          accept_downloads=True)
            page = context.new_page()
            _register_admin(page, base, invitation)
            _create_study(page, source)
            _add_cases_and_a_rubric_version(page, tmp_path)
            links = _invite_two(page)
            clinicians = [_clinician(base, link, email) for link, email in
                          zip(links, ("ana@example.org", "ben@example.org"), strict=True)]
            _watch_progress(page, clinicians)
            _release_flagged(page)
            _export_and_report(page, tmp_path)
            browser.close()


def _register_admin(page, base: str, token: str) -> None:
    register_in_browser(page, base, token, email="owner@example.org",
                        then="**/progress", profile=False)  # an admin fills no clinician profile
    page.get_by_role("link", name="clinieval").click()  # to their studies
    page.wait_for_url("**/studies")


def _create_study(page, source: Path) -> None:
    page.get_by_role("link", name="Create a study").click()
    page.get_by_label("Study id").fill("ecg")
    page.get_by_label("Name").fill("ECG reading study")
    page.get_by_label("Cases and answers").set_input_files(str(source))
    page.get_by_label("Ratings wanted per answer").fill("2")
    page.get_by_label("Share of pairwise tasks").fill("0")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_url("**/s/ecg/progress?created=1")
    assert "Study created." in page.content()


def _add_cases_and_a_rubric_version(page, tmp_path: Path) -> None:
    page.get_by_role("link", name="Cases & rubric").click()
    cases = _figure(page, "#n-cases")
    page.get_by_label("Cases and answers").set_input_files(
        str(_more_cases_zip(tmp_path, "bad", broken=True)))
    page.get_by_role("button", name="Add to the study").click()
    page.locator(".error", has_text="no-such-case").wait_for()
    assert _figure(page, "#n-cases") == cases
    page.get_by_label("Cases and answers").set_input_files(str(_more_cases_zip(tmp_path, "more")))
    page.get_by_role("button", name="Add to the study").click()
    page.locator("[role=status]", has_text="Added").wait_for()
    assert _figure(page, "#n-cases") == 2 * cases
    rubric = tmp_path / "rubric-v2.json"
    rubric.write_text(json.dumps({**rubric_to_dict(load_rubric()), "version": "2.0.0"}))
    page.get_by_label("New version of the rubric").set_input_files(str(rubric))
    page.get_by_role("button", name="Use this version from now on").click()
    page.locator("[role=status]", has_text="record rubric version 2.0.0").wait_for()
    assert page.locator("tr", has_text="2.0.0").inner_text().strip().endswith("current")
    page.get_by_role("link", name="Log").click()
    page.get_by_text("rubric_version_added").first.wait_for()  # the page, loaded
    assert "cases_added" in page.content()


def _invite_two(page) -> list[str]:
    page.get_by_role("link", name="People").click()
    page.get_by_role("textbox", name="E-mail addresses").fill("ana@example.org\nben@example.org")
    page.get_by_role("button", name="Create invitation links").click()
    page.locator("#links").wait_for()
    links = [re.sub(r"^https?://[^/]+", "", t) for t in page.locator("code.link").all_inner_texts()]
    assert len(links) == 2
    return links


def _watch_progress(page, clinicians: list[httpx.Client]) -> None:
    page.get_by_role("link", name="Progress").click()
    needed = _figure(page, "#needed")
    for rounds, c in enumerate(clinicians * 2, start=1):
        _rate_one(c, "ecg")
        page.reload()
        assert _figure(page, "#needed") == needed - rounds
    rows = page.locator("#clinicians tbody tr").all_inner_texts()
    assert len(rows) == 2 and all("\t2\t" in r for r in rows), rows
    page.get_by_role("link", name="Safety").click()
    agreement = page.get_by_role("heading", name="Agreement between clinicians")
    for _ in range(120):  # the view is computed off the request: the page says so until then
        if agreement.count():
            break
        page.wait_for_timeout(500)
        page.reload()
    agreement.wait_for()
    assert "too few to call" in page.content()


def _release_flagged(page) -> None:
    page.get_by_role("link", name="Flagged").click()
    # Waited for: read at once, the page was sometimes still loading (CI saw "").
    page.get_by_text("As an AI developed by OpenAI").first.wait_for()
    page.get_by_role("button", name="Release to clinicians").click()  # the box is required:
    assert page.url.endswith("/admin/flagged")                       # the browser stays
    page.get_by_role("checkbox", name="I have read it").check()
    page.get_by_role("button", name="Release to clinicians").click()
    page.wait_for_url("**/admin/flagged?done=release")
    assert "Nothing awaits a decision." in page.content()
    page.get_by_role("link", name="Log").click()
    page.get_by_text("answer_released").first.wait_for()
    assert "study_created" in page.content()


def _export_and_report(page, tmp_path: Path) -> None:
    with page.expect_download() as download:
        page.get_by_role("button", name="Export").click()
    path = tmp_path / "export.zip"
    download.value.save_as(path)
    archive = zipfile.ZipFile(io.BytesIO(path.read_bytes()))
    ratings = [n for n in archive.namelist() if n.endswith("ratings.parquet")]
    assert ratings, archive.namelist()
    # Every rating was given after the upload of version 2.0.0, and records it.
    versions = pq.read_table(io.BytesIO(archive.read(ratings[0])))["rubric_version"]
    assert len(versions) and set(versions.to_pylist()) == {"2.0.0"}
    page.get_by_role("button", name="Report").click()
    page.wait_for_url("**/admin/report")
    assert page.locator("h1").first.inner_text().strip()
    assert "Fail" in page.content()


def test_the_readme_screenshots_script_runs(tmp_path):
    """docs/screenshots.py (the README's pictures) on a small study: it waits
    for the live view's table and takes both pages."""
    pytest.importorskip("playwright.sync_api")
    script = Path(__file__).resolve().parents[2] / "docs" / "screenshots.py"
    proc = subprocess.Popen([sys.executable, str(script), "--scale", "0.02", "--out",
                             str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the script stops its server on SIGTERM
        _, err = proc.communicate(timeout=60)
        raise AssertionError(f"docs/screenshots.py ran over 600 s: {err[-2000:]}") from None
    assert proc.returncode == 0, err[-2000:]
    for name in ("progress", "safety"):
        png = (tmp_path / f"web-study-{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
