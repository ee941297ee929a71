"""On PostgreSQL every admin page, API call and clinician page goes through
blocking() (a worker thread): while one such call is held, another
clinician's request is served (see :func:`tests.web.support.served_while_held`)."""

from __future__ import annotations

import pytest

from clinieval.platform import (
    accounts,
    adjudication,
    closing,
    events,
    membership,
    screening,
    studies,
    targeting,
)
from clinieval.web import api, clinician
from clinieval.web.testing import SPECIALTIES
from tests.web.support import plant_dispute, served_while_held

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


# Every other admin page and action, the API's token check and signing out make a few
# database calls each: on PostgreSQL they go through blocking() (a worker
# thread), so a clinician is served while one waits. (On SQLite blocking()
# calls them in place; the tests above hold work that runs in a thread there.)
_ADMIN_CALLS = [
    # (module, function held, method, path, form or JSON fields, status, API token)
    (membership, "members", "GET", "/s/x/admin/people", None, 200, False),
    (studies, "content_counts", "GET", "/s/x/admin/content", None, 200, False),
    (screening, "flagged_queue", "GET", "/s/x/admin/flagged", None, 200, False),
    (events, "audit_log", "GET", "/s/x/admin/log", None, 200, False),
    (membership, "revoke", "POST", "/s/x/admin/revoke", {"rater_id": "nobody"}, 422, False),
    (membership, "create_token", "POST", "/s/x/admin/tokens", {"role": "viewer", "label": "t"},
     200, False),
    (membership, "revoke_token", "POST", "/s/x/admin/tokens/revoke", {"token_id": "nope"}, 422,
     False),
    (screening, "decide", "POST", "/s/x/admin/flagged",
     {"answer_id": "nope", "decision": "release", "confirm": "yes"}, 422, False),
    (api, "_grant", "GET", "/api/studies/x/progress", None, 200, True),
    (membership, "members", "GET", "/api/studies/x/members", None, 200, True),
    (screening, "flagged_queue", "GET", "/api/studies/x/flagged", None, 200, True),
    (events, "audit_log", "GET", "/api/studies/x/log", None, 200, True),
    (membership, "create_token", "POST", "/api/studies/x/tokens", {"role": "viewer"}, 201, True),
    (accounts, "sign_out", "POST", "/logout", None, 303, False),
    (studies, "may_create_studies", "GET", "/admin/new", None, 200, False),
    (membership, "revoke", "POST", "/api/studies/x/members/nobody/revoke", None, 422, True),
    (membership, "revoke_token", "POST", "/api/studies/x/tokens/nope/revoke", None, 422, True),
    (targeting, "set_assignment", "POST", "/s/x/admin/assignment", {"escalation_cap": "5"},
     200, False),
    (targeting, "set_assignment", "POST", "/api/studies/x/assignment", {"escalation_cap": 5},
     200, True),
    (closing, "close_study", "POST", "/s/x/admin/close", None, 409, False),
    (closing, "close_study", "POST", "/api/studies/x/close", None, 409, True),
]


@pytest.mark.parametrize(("module", "name", "method", "path", "fields", "expected", "api"),
                         _ADMIN_CALLS, ids=[f"{c[2]} {c[3]}" for c in _ADMIN_CALLS])
def test_a_clinician_is_served_while_an_admin_call_waits_on_postgresql(
        app, engine, monkeypatch, module, name, method, path, fields, expected, api):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    served_while_held(app, engine, monkeypatch, module, name, path, fields=fields,
                      expected=expected, method=method, api=api)


_CLINICIAN_CALLS = [  # (function held, page asked for, the other clinician's page meanwhile)
    ("_done", "/s/x", "/s/x/history"),
    ("_history", "/s/x/history", "/s/x"),
    ("_studies", "/studies", "/s/x"),
]


@pytest.mark.parametrize(("name", "path", "probe"), _CLINICIAN_CALLS,
                         ids=[c[1] for c in _CLINICIAN_CALLS])
def test_a_clinician_is_served_while_another_clinicians_page_waits_on_postgresql(
        app, engine, monkeypatch, name, path, probe):
    """The task list, the history (a query per task) and the list of studies."""
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    served_while_held(app, engine, monkeypatch, clinician, name, path, method="GET",
                      role="clinician", probe=probe)


def test_a_clinician_is_served_while_a_profile_is_saved_on_postgresql(app, engine, monkeypatch):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    served_while_held(app, engine, monkeypatch, clinician, "_save_profile", "/s/x/profile",
                      fields={"specialty": SPECIALTIES["x"], "country": "Chile",
                              "organisation": "Clinic", "experience_years": "3",
                              "role": "specialist", "consent": "yes"},
                      role="clinician", csrf_from="/s/x/profile", expected=303)


def test_a_clinician_is_served_while_an_invitation_is_opened_on_postgresql(
        app, engine, monkeypatch):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    token = accounts.create_invitation(engine, "x", "clinician")
    served_while_held(app, engine, monkeypatch, accounts, "open_invitation", f"/invite/{token}",
                      method="GET", anonymous=True)


_ADJUDICATOR_CALLS = [  # (function held, method, path ({ref}: a disputed answer's), fields)
    ("tasks", "GET", "/s/x/adjudicate", None),
    ("task_view", "GET", "/s/x/adjudicate/{ref}", None),
    ("submit", "POST", "/s/x/adjudicate/{ref}", {
        "verdict.harmlessness": "fail", "verdict.accuracy": "pass", "reason": "Unsafe advice.",
        "supersedes": "0"}),
    ("tasks", "GET", "/api/studies/x/adjudication", None),
    ("task_view", "GET", "/api/studies/x/adjudication/{ref}", None),
]


@pytest.mark.parametrize(("name", "method", "path", "fields"), _ADJUDICATOR_CALLS,
                         ids=[f"{c[1]} {c[2]}" for c in _ADJUDICATOR_CALLS])
def test_a_clinician_is_served_while_an_adjudicators_call_waits_on_postgresql(
        app, engine, monkeypatch, name, method, path, fields):
    """The adjudicator's list, task and verdict, on the pages and the API."""
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    ref = adjudication.task_ref(app.state.signer.key, "x", plant_dispute(engine, "x", 0))
    served_while_held(app, engine, monkeypatch, adjudication, name, path.format(ref=ref),
                      fields=fields, method=method, role="adjudicator",
                      expected=303 if method == "POST" else 200)
