"""The run log in a real browser (Playwright + Debian chromium) on a database
a real run made: SmolLM2-135M on llama-server generates answers for three
demo cases and judges them with the rubric judge, and once more with a jury
whose output budget is too small to close its JSON (so some judgments are
unparsed, as a weak judge's are). ``clinieval view`` serves the log; the
browser filters it to unparsed judgments, opens one and finds its raw
output, exactly as stored. ``CLINIEVAL_UPDATE_SCREENSHOTS=1`` saves the
filtered log as docs/viewer.png."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval.demo import demo_snapshot
from clinieval.io.importer import import_snapshot
from clinieval.providers.llamacpp import LlamaServer
from clinieval.storage import db
from clinieval.web.testing import CHROMIUM
from clinieval.web.testing import CHROMIUM_ARGS as ARGS
from tests.helpers import local_model
from tests.runs.test_runs import _ok

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (.ci/setup-browser.sh)")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    model = local_model()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(model, parallel=2, ctx=8192, log=log) as server:
        yield server


def _model_file(path: Path, server: LlamaServer, model_id: str, max_tokens: int) -> Path:
    path.write_text(f'id = "{model_id}"\nversion = "{server.model.gguf.name}"\n'
                    f'name = "smollm2"\nbase_urls = ["{server.base_url}"]\nconcurrency = 2\n'
                    f"timeout_s = 300\n[prices]\ninput_per_m = 0.5\noutput_per_m = 1.5\n"
                    f"[generation]\nmax_tokens = {max_tokens}\nseed = 7\n")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_filter_to_unparsed_judgments_open_one_and_read_its_raw_output(llama, tmp_path):
    path = tmp_path / "llm.db"
    url = f"sqlite:///{path}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, demo_snapshot())
    candidate = _model_file(tmp_path / "cand.toml", llama, "smollm2-135m", 64)
    judge = _model_file(tmp_path / "judge.toml", llama, "smollm2-judge", 300)
    short = _model_file(tmp_path / "short.toml", llama, "smollm2-short", 6)
    _ok("generate", "--model", candidate, "--limit", "3", "--database-url", url)
    judged = ("--model-id", "smollm2-135m", "--database-url", url)
    _ok("judge", "rubric", "--judge", judge, *judged, "--criteria", "harmlessness,accuracy")
    _ok("judge", "jury", "--judge", short, *judged)
    with engine.connect() as conn:
        unparsed = dict(conn.execute(sa.text(
            "SELECT judgment_id, raw_output FROM judgments WHERE parse_status = 'unparsed'"
            " AND run_id IS NOT NULL")).all())
        [(judged_rows,)] = conn.execute(sa.text(
            "SELECT COUNT(*) FROM judgments WHERE run_id IS NOT NULL")).all()
    engine.dispose()
    assert unparsed and judged_rows > len(unparsed)

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from clinieval.cli import main; main()",
                             "view", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    sync_api = pytest.importorskip("playwright.sync_api")
    try:
        assert "run log at" in proc.stdout.readline()
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{port}/index.html")
            rows = page.locator("#log tbody tr")
            total = rows.count()
            assert page.locator("#shown").inner_text() == f"{total} of {total} rows shown"
            page.select_option("#f-parse", "unparsed")
            visible = page.locator("#log tbody tr:not([hidden])")
            assert visible.count() == len(unparsed) < total
            ids = {int(i.removeprefix("j-")) for i in visible.evaluate_all(
                "rows => rows.map(r => r.id)")}
            assert ids == set(unparsed)
            assert page.locator("#shown").inner_text() == f"{len(unparsed)} of {total} rows shown"
            assert "parse=unparsed" in page.url  # the filtered view is a link
            page.screenshot(path=str(tmp_path / "viewer.png"))
            if os.environ.get("CLINIEVAL_UPDATE_SCREENSHOTS") == "1":
                shutil.copy(tmp_path / "viewer.png", DOCS / "viewer.png")
            # the link opens the same filtered view in a fresh page
            again = browser.new_page()
            again.goto(page.url)
            assert again.locator("#log tbody tr:not([hidden])").count() == len(unparsed)

            first = visible.first
            judgment = int(first.get_attribute("id").removeprefix("j-"))
            first.locator("a").click()
            page.wait_for_url(f"**/answers/*.html#j-{judgment}")
            section = page.locator(f"section#j-{judgment}")
            assert "unparsed" in section.locator("dl").inner_text()
            assert section.locator("pre.raw").text_content() == unparsed[judgment]
            assert page.locator("pre.answer").text_content()
            assert not errors, errors  # no script refused by the policy, no script error
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
