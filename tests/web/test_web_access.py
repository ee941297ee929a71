"""Access to the clinician platform over HTTP, on SQLite and PostgreSQL: every
route declares its level and refuses exactly the roles that level refuses, and a
clinician reaches only their own tasks, in their own study's address."""

from __future__ import annotations

import re
import typing

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.platform import accounts, adjudication, events
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import ROUTE_LEVELS
from clinieval.web.testing import http_client as client
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, count, csrf, plant_dispute, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


ROLES = ("anonymous", "clinician", "other_study_clinician", "admin", "adjudicator",
         "other_study_adjudicator")

OUTSIDERS = {"anonymous", "other_study_clinician", "other_study_adjudicator"}
REFUSED = {  # level -> roles refused
    "public": set(),
    "user": {"anonymous"},
    "member": OUTSIDERS,
    "clinician": OUTSIDERS | {"admin", "adjudicator"},
    # Study administration: the full matrix with viewers and tokens is in test_web_admin.
    "creator": OUTSIDERS | {"clinician", "adjudicator"},
    "viewer": OUTSIDERS | {"clinician", "adjudicator"},
    "admin": OUTSIDERS | {"clinician", "adjudicator"},
    "adjudicator": OUTSIDERS | {"clinician", "admin"},
}

API_LEVELS = {"api_creator", "api_viewer", "api_admin"}
"""Bearer-token routes; this module's clients hold sessions only."""


def _served(routes) -> typing.Iterator[str]:
    """Every path the app answers (included routers flattened; static files aside)."""
    for r in routes:
        if hasattr(r, "original_router"):
            yield from _served(r.original_router.routes)
        elif hasattr(r, "methods"):
            yield r.path + " " + ",".join(sorted(r.methods))


def test_every_route_declares_an_access_level(app):
    assert set(_served(app.routes)) == set(ROUTE_LEVELS)
    assert set(ROUTE_LEVELS.values()) <= set(REFUSED) | API_LEVELS


def test_the_task_routes_tried_first_shadow_no_other_route():
    from clinieval.web.app import TASK_PATHS, _flat, pages

    routes = [r for r in _flat(pages.routes) if hasattr(r, "path_regex")]
    first = [r for r in routes if r.path in TASK_PATHS]
    for route in routes:
        if route.path not in TASK_PATHS:
            example = re.sub(r"\{[^}]+\}", "x", route.path)
            assert not any(r.path_regex.match(example) for r in first), route.path


def test_every_route_for_every_role(app, engine):
    clients = {"anonymous": client(app), "clinician": member(app, engine, "x", "clinician"),
               "other_study_clinician": member(app, engine, "y", "clinician"),
               "admin": member(app, engine, "x", "admin"),
               "adjudicator": member(app, engine, "x", "adjudicator"),
               "other_study_adjudicator": member(app, engine, "y", "adjudicator")}
    task = take(clients["clinician"]).rsplit("/", 1)[1]
    # A disputed answer of x, so the adjudicator's task routes have a task to show.
    ref = adjudication.task_ref(app.state.signer.key, "x", plant_dispute(engine, "x", 1))
    # Sign-out last: it ends the session the other requests use.
    for key in sorted(ROUTE_LEVELS, key=lambda k: k.startswith("/logout")):
        path, method = key.split(" ")
        level = ROUTE_LEVELS[key]
        if level in API_LEVELS:
            continue
        method = "GET" if "GET" in method.split(",") else "POST"
        for role in ROLES:
            c = clients[role]
            # Invitations are to study y, so accepting one changes no role in x.
            url = path.format(study="x", token=accounts.create_invitation(engine, "y", "clinician")
                              if path.startswith("/invite") else task, ref=ref)
            r = _request(c, method, url)
            refused = role in REFUSED[level]
            assert _was_refused(r, method, role) == refused, (key, role, r.status_code)


def _request(c: TestClient, method: str, url: str):
    if method == "GET":
        return c.get(url)
    token = csrf(c)
    if url.endswith("/draft"):
        return c.post(url, json={"fields": {}}, headers={"X-CSRF-Token": token})
    return c.post(url, data={"csrf": token})


def _was_refused(r, method: str, role: str) -> bool:
    if r.status_code == 303 and r.headers["location"].startswith("/login?next="):
        return True
    if r.status_code == 401:
        return "Sign in first" in r.text  # not a failed sign-in on the public form
    return r.status_code == 403


def test_a_clinician_cannot_open_or_draft_another_clinicians_task(app, engine):
    owner, other = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    url = take(owner)
    assert other.get(url).status_code == 404
    r = other.post(url + "/draft", json={"fields": {"s1.accuracy": "2"}},
                   headers={"X-CSRF-Token": csrf(other)})
    assert r.status_code == 404
    assert count(engine, platform_tables.drafts) == 0
    form = {**answer_form(owner, url), "csrf": csrf(other)}  # a complete, valid answer
    for accept in ("text/html", "application/json"):
        assert other.post(url, data=form, headers={"accept": accept}).status_code == 404
    headers = {"X-CSRF-Token": csrf(other)}  # whatever the body, the task is not theirs
    for body in ([1], {**form, "next": "bogus"}, {**form, "s1.accuracy": [[2]]}):
        assert other.post(url, json=body, headers=headers).status_code == 404
    assert count(engine, snapshot_tables.ratings) == 0
    assert owner.post(url, data={**form, "csrf": csrf(owner)}).status_code == 303
    assert count(engine, snapshot_tables.ratings) == 9


def test_a_task_is_answered_only_in_its_own_studys_address(app, engine):
    """A clinician of two studies cannot submit study x's task under study y."""
    import json as json_module

    c = member(app, engine, "x", "clinician")
    url = take(c)
    with engine.begin() as conn:  # the same clinician joins y, which now offers their specialty
        memberships = platform_tables.memberships
        user_id = conn.execute(sa.select(memberships.c.user_id)
                               .where(memberships.c.study_id == "x")).scalars().all()[-1]
        conn.execute(memberships.insert().values(study_id="y", user_id=user_id,
                                                 role="clinician", consented_at=events.now()))
        conn.execute(platform_tables.study_settings.update()
                     .where(platform_tables.study_settings.c.study_id == "y")
                     .values(specialties=json_module.dumps(["Pulmonology", "Pathology"])))
    assert c.get("/s/y").status_code == 200  # a clinician of y indeed
    form = answer_form(c, url)
    assert c.post(url.replace("/s/x/", "/s/y/"), data=form).status_code == 404
    assert c.get(url.replace("/s/x/", "/s/y/")).status_code == 404
    assert count(engine, snapshot_tables.ratings) == 0
    assert c.post(url, data=form).status_code == 303
    assert count(engine, snapshot_tables.ratings) == 9
