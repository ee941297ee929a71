"""Fixture builders for the platform's tests: a study source whose models have
real-looking names (so a blinding scan means something) and answers that do
and do not identify themselves, and helpers that take an account through
invitation, registration and profile over HTTP."""

from __future__ import annotations

import re
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.platform import accounts
from clinieval.platform.demo import demo_source
from clinieval.platform.studies import StudyPlan, create_study
from clinieval.rubric import load_rubric
from clinieval.snapshot import Snapshot

MODELS = [
    {"model_id": "gpt-4o-2024-08-06", "display_name": "GPT-4o", "version": "2024-08-06",
     "provider": "OpenAI"},
    {"model_id": "claude-3-5-sonnet-20240620", "display_name": "Claude 3.5 Sonnet",
     "version": "20240620", "provider": "Anthropic"},
    {"model_id": "gemini-1.5-pro-002", "display_name": "Gemini 1.5 Pro", "version": "002",
     "provider": "Google DeepMind"},
    {"model_id": "llama-3.1-70b-instruct", "display_name": "Llama 3.1 70B Instruct",
     "version": "3.1", "provider": "Meta"},
]
"""Models of the test studies. Every one of these strings must stay out of
every clinician-facing response."""

SPECIALTIES = {"x": "Pathology", "y": "Pulmonology"}

SELF_IDENTIFYING = {
    0: "As an AI developed by OpenAI, I cannot examine the patient, but the rash needs review.",
    1: "I'm Claude, an AI assistant. The symptoms described warrant an ECG today.",
}
LOOK_ALIKES = (
    "Claude, a 54-year-old patient named Claude, reports palmar erythema; check liver enzymes.",
    "Her star sign is Gemini, which she mentions often; it has no bearing on the headache.",
    "Exposure to a llama on a farm two weeks ago is relevant: ask about fever and cough.",
    "Examine the palm and the thenar eminence for wasting before ordering nerve studies.",
)


def blinding_source() -> Snapshot:
    """Demo cases and answers with the models above: per study specialty, the
    first case's answers introduce themselves (two of them), the others'
    contain look-alike words that must not be flagged."""
    snap = demo_source()
    models = pa.Table.from_pylist(MODELS)
    answers = snap["answers"]
    cases = snap["cases"].filter(pc.is_in(snap["cases"]["specialty"],
                                          pa.array(list(SPECIALTIES.values()))))
    answers = answers.filter(pc.is_in(answers["case_id"], cases["case_id"]))
    ids = [MODELS[i % len(MODELS)]["model_id"] for i in range(answers.num_rows)]
    answers = answers.set_column(answers.schema.get_field_index("model_id"), "model_id",
                                 pa.array(ids))
    texts = _texts(answers, cases)
    answers = answers.set_column(answers.schema.get_field_index("text"), "text", pa.array(texts))
    return Snapshot.from_tables({**snap.tables, "models": models, "answers": answers,
                                 "cases": cases, "ratings": None, "preferences": None,
                                 "judgments": None, "raters": None}, snap.meta)


def _texts(answers: pa.Table, cases: pa.Table) -> list[str]:
    first_case = {}
    for case_id, specialty in zip(cases["case_id"].to_pylist(), cases["specialty"].to_pylist(),
                                  strict=True):
        first_case.setdefault(specialty, case_id)
    texts, seen = [], {}
    for case_id, text in zip(answers["case_id"].to_pylist(), answers["text"].to_pylist(),
                             strict=True):
        n = seen[case_id] = seen.get(case_id, -1) + 1
        if case_id in first_case.values() and n in SELF_IDENTIFYING:
            text = SELF_IDENTIFYING[n]
        elif n < len(LOOK_ALIKES):
            text = f"{LOOK_ALIKES[n]} {text}"
        texts.append(text)
    return texts


def make_studies(engine: sa.Engine, overlap: int = 2, pairwise_share: float = 0.2) -> None:
    """Studies ``x`` and ``y`` (one specialty each) from :func:`blinding_source`."""
    source = blinding_source()
    for study_id, specialty in SPECIALTIES.items():
        create_study(engine, StudyPlan(study_id, f"Study {study_id}", load_rubric(),
                                       overlap_target=overlap, pairwise_share=pairwise_share,
                                       specialties=(specialty,)), source)


def model_strings() -> list[str]:
    """Every identifying string of the test models. Version fragments under
    five characters ("002", "3.1") are left out: they identify no model on
    their own and turn up by chance inside random tokens, which made the
    scan flaky; the ids and names that contain them are still scanned."""
    return sorted({v for m in MODELS for v in m.values() if v and len(v) >= 5})


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "page has no CSRF field"
    return match.group(1)


def register_in_browser(page, base: str, token: str, *, email: str, organisation: str = "",
                        then: str, profile: bool = True) -> None:
    """Take a Playwright ``page`` through invitation, registration and, with
    ``profile`` (a clinician's invitation), the profile (Pathology, Ghana, 9
    years, specialist), waiting for the URL ``then`` (a viewer or admin lands
    on it at once)."""
    page.goto(f"{base}/invite/{token}")
    page.get_by_label("E-mail address").fill(email)
    page.get_by_label("Password", exact=True).fill("a long passphrase")
    page.get_by_label("Password again").fill("a long passphrase")
    page.get_by_role("button", name="Create account").click()
    if not profile:
        page.wait_for_url(then)
        return
    page.wait_for_url("**/profile")
    page.get_by_label("Specialty").select_option("Pathology")
    page.get_by_label("Country").fill("Ghana")
    page.get_by_label("Organisation").fill(organisation)
    page.get_by_label("Years of practice").fill("9")
    page.get_by_label("Role").select_option("specialist")
    page.get_by_label("I have read and agree.").check()
    page.get_by_role("button", name="Save profile").click()
    page.wait_for_url(then)


def register_via_http(client, engine: sa.Engine, study_id: str, role: str,
                      specialty: str | None = None) -> str:
    """Take ``client`` (httpx or Starlette TestClient) through invitation,
    registration and, for a clinician, profile; returns the account's e-mail
    address."""
    token = accounts.create_invitation(engine, study_id, role)
    page = client.get(f"/invite/{token}")
    email = f"{role}-{secrets.token_hex(4)}@example.org"
    password = "correct horse battery"
    r = client.post(f"/invite/{token}", data={"csrf": csrf_of(page.text), "email": email,
                                              "password": password, "password2": password})
    assert r.status_code == 303, r.text
    if role != "clinician":  # a viewer or admin fills no rater profile
        return email
    profile = client.get(f"/s/{study_id}/profile")
    r = client.post(f"/s/{study_id}/profile", data={
        "csrf": csrf_of(profile.text), "specialty": specialty or SPECIALTIES[study_id],
        "country": "Kenya", "organisation": "County hospital", "experience_years": "7",
        "role": "specialist", "consent": "yes"})
    assert r.status_code == 303, r.text
    return email


CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium (``.ci/setup-browser.sh`` installs it), which the browser
tests and ``docs/screenshots.py`` drive with Playwright."""
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db_url: str, port: int, log: Path) -> subprocess.Popen:
    """``clinieval serve`` in a child process on ``port``, once it answers.

    The port is bound and listening here before the child starts, and the
    child serves on that socket (``--fd``): the port cannot be taken while the
    child imports (a parallel test's server or client could, and this one's
    readiness check then saw the other's server answer)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart on the same port
        sock.bind(("127.0.0.1", port))
        sock.listen(2048)
        cli = Path(sys.executable).with_name("clinieval")
        proc = subprocess.Popen(
            [str(cli), "serve", "--database-url", db_url, "--fd", str(sock.fileno())],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, pass_fds=(sock.fileno(),))
    # The child holds the socket now; closed here, it stops listening when the child dies.
    return wait_until_serving(proc, port, log)


@contextmanager
def served_studies(db_url: str, tmp_path: Path, **options) -> Iterator[tuple[sa.Engine, str]]:
    """The test studies (:func:`make_studies`, with ``options``) in a new
    database at ``db_url``, served by ``clinieval serve`` for the block:
    yields the engine and the server's base URL; the server is stopped
    afterwards."""
    from clinieval.storage import db

    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine, **options)
    port = free_port()
    server = start_server(db_url, port, tmp_path / "server.log")
    try:
        yield engine, f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()
        engine.dispose()


def wait_until_serving(proc: subprocess.Popen, port: int, log: Path) -> subprocess.Popen:
    """Return ``proc`` once its server answers on ``port``; kill it and fail
    with the end of its log if it does not within 90 s (a loaded 2-core
    machine imports slowly)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # it died (its port taken meanwhile, say)
            raise AssertionError(f"server exited with {proc.returncode}: "
                                 f"{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"server did not start: {log.read_text()[-2000:]}")


def http_client(app):
    """An in-process HTTP client of ``app`` that shows redirects as they are."""
    from fastapi.testclient import TestClient

    return TestClient(app, follow_redirects=False)


def member_client(app, engine: sa.Engine, study: str, role: str):
    """A client signed in as a newly registered member of ``study``."""
    c = http_client(app)
    register_via_http(c, engine, study, role)
    return c
