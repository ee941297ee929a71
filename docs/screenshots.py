"""The README's pictures of a study in progress: the admin's progress page
and live safety view of a synthetic MOOVE-like study (``--scale 0.1``: a
tenth of the paper's ratings, its 13 models and 76 specialties), served by
``clinieval serve`` on SQLite and opened in Debian's chromium.

    .venv/bin/python docs/screenshots.py            # writes docs/web-study-*.png

The study is seeded as the load benchmark seeds it (benchmarks/bench_serve.py):
the synthetic ratings and votes, the study's settings, every answer cleared
by the leak guard, and a signed-in admin.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.synth import STUDY_ID
from clinieval.web.testing import CHROMIUM, CHROMIUM_ARGS, free_port, start_server

DOCS = Path(__file__).resolve().parent


def _bench():
    """benchmarks/bench_serve.py as a module (its ``seed``)."""
    path = DOCS.parent / "benchmarks" / "bench_serve.py"
    spec = importlib.util.spec_from_file_location("bench_serve", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait_for_live_view(base: str, cookie: str, seconds: float = 300) -> None:
    """The live view of a large study is computed in the background at first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = httpx.get(f"{base}/s/{STUDY_ID}/safety", cookies={"ce_session": cookie}, timeout=60)
        r.raise_for_status()
        if 'id="models"' in r.text:
            return
        time.sleep(2)
    raise SystemExit(f"the live view was not ready after {seconds:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--target", type=int, default=3, help="ratings wanted per answer")
    parser.add_argument("--out", type=Path, default=DOCS)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/study.db"
        cookies, _target = _bench().seed(url, args.scale, 1)
        # The benchmark leaves room for two more raters on every answer; a study
        # mid-way has some cells complete and others lagging.
        engine = db.make_engine(url)
        try:
            with db.writing(engine) as conn:
                conn.execute(platform_tables.study_settings.update().values(overlap_target=args.target))
        finally:
            engine.dispose()
        signed, _csrf = cookies["admin"]
        port = free_port()
        log = Path(tmp) / "server.log"
        server = start_server(url, port, log)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for_live_view(base, signed)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                context = browser.new_context(viewport={"width": 1280, "height": 1000})
                context.add_cookies([{"name": "ce_session", "value": signed,
                                      "url": base, "httpOnly": True, "sameSite": "Lax"}])
                page = context.new_page()
                for name, path, height in (("progress", "progress", 1000),
                                           ("safety", "safety", 1500)):
                    page.goto(f"{base}/s/{STUDY_ID}/{path}")
                    out = args.out / f"web-study-{name}.png"
                    page.screenshot(path=str(out), full_page=True,
                                    clip={"x": 0, "y": 0, "width": 1280, "height": height})
                    print(f"wrote {out}")
                browser.close()
        except BaseException:
            print(f"the server's log ended:\n{log.read_text()[-2000:]}", file=sys.stderr)
            raise
        finally:
            server.kill()
            server.wait()


def _stop(signum, _frame) -> None:
    """A SIGTERM ends the script through its clean-ups (the server, the study)."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    sys.exit(main())
