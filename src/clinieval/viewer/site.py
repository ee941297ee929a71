"""Building the viewer's static site and serving it (see :mod:`clinieval.viewer`)."""

from __future__ import annotations

import functools
import http.server
import tempfile
from pathlib import Path

import sqlalchemy as sa

from clinieval.viewer.assets import CSP, FAVICON, SCRIPT, STYLE
from clinieval.viewer.data import load
from clinieval.viewer.pages import answer_page, index


def build_site(engine: sa.Engine, folder: Path) -> int:
    """Write the site into ``folder`` (created; pages of an earlier build are
    replaced); the number of pages written."""
    answers = load(engine)
    folder = Path(folder)
    (folder / "answers").mkdir(parents=True, exist_ok=True)
    (folder / "viewer.js").write_text(SCRIPT, "utf-8")
    (folder / "viewer.css").write_text(STYLE, "utf-8")
    (folder / "favicon.ico").write_bytes(FAVICON)
    (folder / "index.html").write_text(index(answers), "utf-8")
    for answer in answers:
        (folder / "answers" / answer.page).write_text(answer_page(answer), "utf-8")
    return len(answers) + 1


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Files of the built site, with the policy as a header too."""

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP + "; frame-ancestors 'none'")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # quiet: one line per page is noise
        pass


def serve(engine: sa.Engine, host: str = "127.0.0.1", port: int = 8010) -> None:
    """Build the site in a temporary folder and serve it until interrupted."""
    with tempfile.TemporaryDirectory(prefix="clinieval-view-") as folder:
        build_site(engine, Path(folder))
        handler = functools.partial(_Handler, directory=folder)
        with http.server.ThreadingHTTPServer((host, port), handler) as server:
            print(f"run log at http://{host}:{server.server_address[1]}/ (Ctrl-C stops)",
                  flush=True)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
