"""Which task a clinician is given, over HTTP, on SQLite and PostgreSQL: the
least rated answers first up to the overlap target (also under concurrent
requests), skips and lapsed leases, balanced pairs, never an answer twice."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.contract import vocabulary
from clinieval.platform import events
from clinieval.platform.screening import flagged_answers
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, clear_answers, csrf, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_answers_go_to_the_least_rated_first_and_never_twice_to_one_rater(app, engine):
    raters = [member(app, engine, "x", "clinician") for _ in range(3)]
    seen: list[set[str]] = []
    for c in raters:
        mine = set()
        while (r := c.post("/s/x/next", data={"csrf": csrf(c), "kind": "rating"})
               ).headers["location"] != "/s/x?empty=1":
            url = r.headers["location"]
            mine.add(_answer_of(engine, url))
            assert c.post(url, data=answer_form(c, url)).status_code == 303
        seen.append(mine)
    clear = clear_answers(engine, "x")
    # overlap target 2: the first two raters cover every clear answer, the third gets none
    assert seen[0] == seen[1] == clear and seen[2] == set()
    assert not clear & {f["answer_id"] for f in flagged_answers(engine, "x")}


def _answer_of(engine, url: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.task_leases.c.answer_id).where(
            platform_tables.task_leases.c.token == url.rsplit("/", 1)[1])).scalar_one()


def test_concurrent_requests_never_exceed_the_overlap_target(app, engine):
    """Six clinicians ask at once for the one answer left (target 2): two get it."""
    keep = sorted(clear_answers(engine, "x"))[0]
    with db.writing(engine) as conn:
        conn.execute(platform_tables.answer_screens.update()
                     .where(platform_tables.answer_screens.c.answer_id != keep)
                     .values(status="flagged"))
    raters = [member(app, engine, "x", "clinician") for _ in range(6)]
    tokens = [csrf(c) for c in raters]
    barrier = threading.Barrier(len(raters))
    locations: list[str] = []

    def grab(c: TestClient, token: str) -> None:
        barrier.wait()
        locations.append(c.post("/s/x/next", data={"csrf": token, "kind": "rating"})
                         .headers["location"])

    threads = [threading.Thread(target=grab, args=pair)
               for pair in zip(raters, tokens, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum("/t/" in loc for loc in locations) == 2
    assert {_answer_of(engine, loc) for loc in locations if "/t/" in loc} == {keep}


def test_outside_my_expertise_and_lease_expiry_return_answers_to_the_pool(app, engine):
    a, b = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    first = take(a)
    answer = _answer_of(engine, first)
    assert a.post(first + "/skip", data={"csrf": csrf(a)}).status_code == 303
    assert _answer_of(engine, take(a)) != answer  # never offered to a again
    with db.writing(engine) as conn:
        conn.execute(platform_tables.task_leases.update()
                     .values(expires_at=events.now() - timedelta(hours=1)))
    assert _answer_of(engine, take(b)) == answer  # skipped and expired leases do not count


def test_pairs_balance_model_pairs_and_record_the_shown_side(app, engine):
    raters = [member(app, engine, "x", "clinician") for _ in range(2)]
    for c in raters:
        for _ in range(6):
            url = take(c, "pair")
            assert c.post(url, data=answer_form(c, url)).status_code == 303
    with engine.connect() as conn:
        a1, a2 = snapshot_tables.answers.alias(), snapshot_tables.answers.alias()
        prefs = snapshot_tables.preferences
        rows = conn.execute(sa.select(a1.c.model_id, a2.c.model_id, prefs.c.shown_left)
                            .join(a1, a1.c.answer_id == prefs.c.answer_a_id)
                            .join(a2, a2.c.answer_id == prefs.c.answer_b_id)).all()
    pairs: dict[tuple, int] = {}
    for m1, m2, _ in rows:
        pairs[tuple(sorted((m1, m2)))] = pairs.get(tuple(sorted((m1, m2))), 0) + 1
    assert len(rows) == 12 and max(pairs.values()) - min(pairs.values()) <= 1
    assert len(pairs) == 6  # every pair of the four models
    assert {side for *_, side in rows} == set(vocabulary.SIDES)


def test_a_pair_never_holds_an_answer_the_clinician_rated_skipped_or_was_given(app, engine):
    """Pairs are picked from the specialty's answers less the clinician's own
    (read once, then left out in Python): after two rated answers and a skipped
    one, every pair until none is left holds only answers new to them, and each
    answer comes once."""
    c = member(app, engine, "x", "clinician")
    held: list[str] = []
    for _ in range(2):
        url = take(c, "rating")
        held.append(_answer_of(engine, url))
        assert c.post(url, data=answer_form(c, url)).status_code == 303
    url = take(c, "rating")
    held.append(_answer_of(engine, url))
    assert c.post(url + "/skip", data={"csrf": csrf(c)}).status_code == 303
    before = set(held)
    pairs = 0
    while (r := c.post("/s/x/next", data={"csrf": csrf(c), "kind": "pair"})
           ).headers["location"] != "/s/x?empty=1":
        url = r.headers["location"]
        with engine.connect() as conn:
            leases = platform_tables.task_leases
            a, b = conn.execute(sa.select(leases.c.answer_id, leases.c.answer_b_id)
                                .where(leases.c.token == url.rsplit("/", 1)[1])).one()
        assert not {a, b} & before
        held += [a, b]
        assert c.post(url, data=answer_form(c, url, choice="A")).status_code == 303
        pairs += 1
    assert pairs > 0 and len(held) == len(set(held))


def test_the_clinicians_own_answers_read_at_once_are_those_the_per_answer_probes_find(
        app, engine):
    """The pair pool leaves out ``_MINE`` (one read of the clinician's rated
    and leased answers); the rating walk and the re-counts under the lock ask
    ``_not_mine`` of each answer. After rated, skipped, voted and still open
    tasks (and another clinician's), both give the same answers."""
    from clinieval.platform import assignment
    from clinieval.storage.prepared import run

    c, other = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    for kind, action in (("rating", "submit"), ("rating", "submit"), ("rating", "skip"),
                         ("pair", "submit"), ("pair", "keep")):
        url = take(c, kind)
        if action == "submit":
            assert c.post(url, data=answer_form(c, url)).status_code == 303
        elif action == "skip":
            assert c.post(url + "/skip", data={"csrf": csrf(c)}).status_code == 303
    take(other, "rating")
    al = platform_tables.answer_load
    with engine.connect() as conn:
        users = conn.execute(sa.select(platform_tables.users.c.user_id,
                                       platform_tables.users.c.rater_id)).all()
        sizes = []
        for user in users:
            probed = set(conn.execute(sa.select(al.c.answer_id).where(
                ~assignment._not_mine(user, al.c.answer_id))).scalars())
            read = set(run(conn, assignment._MINE, {"rater": user.rater_id, "user": user.user_id})
                       .scalars()) & set(conn.execute(sa.select(al.c.answer_id)).scalars())
            assert read == probed, user.user_id
            sizes.append(len(read))
    # three rating tasks and two pairs; the other clinician's one task
    assert sorted(sizes)[-2:] == [1, 7]
