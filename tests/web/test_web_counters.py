"""The trigger-kept load counters (``answer_load``, ``pair_load``,
``rater_load``) equal a
recount from the ratings and votes themselves: after a concurrent run of
clinicians against a real server, after bulk imports, edits and deletions,
and after the migration fills them for rows stored before it (SQLite and
PostgreSQL)."""

from __future__ import annotations

import re
import secrets
import threading
import time

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa
from alembic import command

from clinieval.io.importer import import_snapshot
from clinieval.storage import counters, db
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of, free_port, make_studies, register_via_http, start_server

CLINICIANS = 6
TASKS_EACH = 6


def _same(engine: sa.Engine) -> tuple[dict, dict]:
    with engine.connect() as conn:
        derived, kept = counters.recount(conn), counters.stored(conn)
        raters = counters.stored_raters(conn)
        assert raters == counters.recount_raters(conn)
    assert kept[0] == derived[0]
    assert kept[1] == derived[1]
    return (*kept, raters)


def _work(c: httpx.Client, acked: list[str], errors: list[str]) -> None:
    """Rating and pair tasks, and now and then an edit (a new revision)."""
    token = csrf_of(c.get("/s/x").text)
    for i in range(TASKS_EACH):
        r = c.post("/s/x/next", data={"csrf": token, "kind": "pair" if i % 3 == 2 else "rating"})
        url = r.headers.get("location", "")
        if "/t/" not in url:
            errors.append(f"next gave {r.status_code} {url}")
            return
        names = sorted(set(re.findall(r'name="(s[12]\.[a-z_]+)"', c.get(url).text)))
        body = {n: str(secrets.choice((0, 1, 2))) for n in names}  # no rationale needed
        body["time_spent_s"] = 5
        if any(n.startswith("s2.") for n in names):
            body["choice"] = secrets.choice(("A", "B", "tie"))
        for _ in range(1 + (i % 2)):  # every other task is edited once
            body["idempotency_key"] = secrets.token_hex(12)
            r = c.post(url, json=body, headers={"X-CSRF-Token": token})
            if r.status_code != 200:
                errors.append(f"submit gave {r.status_code}: {r.text[:200]}")
                return
        acked.append(url)


def test_counters_match_a_recount_after_a_concurrent_run(db_url, tmp_path):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine, overlap=3, pairwise_share=0.3)
    port, log = free_port(), tmp_path / "server.log"
    server = start_server(db_url, port, log)
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
               for _ in range(CLINICIANS)]
    try:
        for c in clients:
            register_via_http(c, engine, "x", "clinician")
        acked: list[str] = []
        errors: list[str] = []
        threads = [threading.Thread(target=_work, args=(c, acked, errors)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
    finally:
        server.kill()
        server.wait()
        for c in clients:
            c.close()
    assert not errors, (errors, log.read_text()[-2000:])
    assert len(acked) == CLINICIANS * TASKS_EACH
    answers, pairs, raters = _same(engine)
    assert sum(row[-1] for row in answers.values()) > 0 and sum(pairs.values()) > 0
    # Every clinician's tasks: 4 rating tasks and 2 pairs of two answers, each answer
    # and vote counted once however often it was edited, and the time they spent.
    assert sorted(v[:2] for v in raters.values()) == [(8, 2)] * CLINICIANS
    assert all(v[2] > 0 for v in raters.values())
    assert max(row[-1] for row in answers.values()) <= 3  # never over the target
    engine.dispose()


def test_counters_follow_imports_deletions_and_the_migration(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0005")  # rows stored before the counters existed
    make_studies(engine, overlap=2)
    with engine.connect() as conn:
        answers = conn.execute(sa.select(snapshot_tables.answers.c.answer_id,
                                         snapshot_tables.answers.c.case_id)
                               .join(snapshot_tables.cases)
                               .where(snapshot_tables.cases.c.study_id == "x")
                               .order_by(snapshot_tables.answers.c.answer_id)).all()
        criteria = conn.execute(sa.select(snapshot_tables.criteria.c.criterion_id)).scalars().all()[
            :2]
    (a1, case), (a2, case2) = answers[0], answers[1]
    assert case == case2, "the first two answers of study x answer one case"
    _rate(engine, [("r1", a1), ("r2", a1)], criteria)
    db.upgrade(engine)  # 0006_webperf fills the counters from the stored rows
    kept, _, raters = _same(engine)
    assert kept[("x", a1)][-1] == 2
    assert raters[("x", "r1")] == raters[("x", "r2")] == (1, 0, 0)
    _rate(engine, [("r3", a1), ("r3", a2)], criteria, revision=0, seconds=[30.0, 45.5])
    _rate(engine, [("r3", a1)], criteria, revision=1, seconds=[99.0])  # an edit adds no rater
    with db.writing(engine) as conn:
        conn.execute(snapshot_tables.preferences.insert().values(
            case_id=case, answer_a_id=a1, answer_b_id=a2, shown_left="A", choice="A",
            rater_id="r3", created_at=sa.func.now()))
        conn.execute(snapshot_tables.preferences.insert().values(  # an edited vote adds no vote
            case_id=case, answer_a_id=a1, answer_b_id=a2, shown_left="A", choice="tie",
            rater_id="r3", revision=1, created_at=sa.func.now()))
    kept, pairs, raters = _same(engine)
    assert kept[("x", a1)][-1] == 3 and kept[("x", a2)][-1] == 1 and sum(pairs.values()) == 1
    # Two answers, one vote; per answer the longest time of its first ratings (the
    # second criterion's row took longer), the edit's time left out.
    assert raters[("x", "r3")] == (2, 1, 31_000 + 46_500)
    with db.writing(engine) as conn:  # deleting every row of one rater takes them off
        conn.execute(snapshot_tables.preferences.delete())
        conn.execute(snapshot_tables.ratings.delete().where(snapshot_tables.ratings.c.rater_id
                                                            == "r3"))
    kept, pairs, raters = _same(engine)
    assert kept[("x", a1)][-1] == 2 and kept[("x", a2)][-1] == 0 and not pairs
    assert ("x", "r3") not in raters and ("x", "r1") in raters
    config = db.alembic_config(engine)
    with engine.begin() as conn:  # the downgrade removes triggers and tables
        config.attributes["connection"] = conn
        command.downgrade(config, "0006_webfeat")
    _rate(engine, [("r4", a2)], criteria)  # and imports work without them
    with engine.connect() as conn:
        assert not sa.inspect(conn).has_table("answer_load")
    engine.dispose()


def _rate(engine: sa.Engine, pairs: list[tuple[str, str]], criteria: list[str],
          revision: int = 0, seconds: list[float] | None = None) -> None:
    """Ratings through the bulk importer (the path ``clinieval import`` takes);
    ``seconds[i]`` is the time of pair i's first criterion (the next ones take
    a second longer each)."""
    from clinieval.snapshot import Snapshot

    raters = sorted({r for r, _ in pairs})
    with engine.connect() as conn:
        known = set(conn.execute(sa.select(snapshot_tables.raters.c.rater_id)).scalars())
    rows = [{"answer_id": a, "rater_id": r, "criterion_id": c, "score": 1, "revision": revision,
             "time_spent_s": None if seconds is None else seconds[i] + j}
            for i, (r, a) in enumerate(pairs) for j, c in enumerate(criteria)]
    tables = {"raters": pa.Table.from_pylist([{"rater_id": r} for r in raters
                                              if r not in known]) if set(raters) - known
              else None, "ratings": pa.Table.from_pylist(rows)}
    import_snapshot(engine, Snapshot.from_tables(tables, {}))


def test_a_large_studys_live_view_is_computed_in_the_background(engine, monkeypatch):
    """Above the inline limit the page does not wait: it says the view is being
    computed, a background process computes it with the audit's own code, and
    later loads show that result with its as-of time and n."""
    from clinieval.platform import live

    make_studies(engine, overlap=3)
    with engine.connect() as conn:
        answers = conn.execute(sa.select(snapshot_tables.answers.c.answer_id).join(
            snapshot_tables.cases).where(
            snapshot_tables.cases.c.study_id == "x")).scalars().all()
        criteria = conn.execute(sa.select(snapshot_tables.criteria.c.criterion_id)).scalars().all()
    _rate(engine, [(f"r{i}", a) for i in range(2) for a in answers], criteria)
    monkeypatch.setattr(live, "LIVE_EVERY_CHANGE_RATED", 1)
    monkeypatch.setattr(live, "_cache", {})  # no view left by an earlier test of this database
    monkeypatch.setattr(live, "LIVE_WAIT_SECONDS", 0.0)  # a warm worker can finish a small study
    # within the page's short wait; this test is about the page not waiting
    first = live.safety_view(engine, "x")
    assert first["pending"] and first["rated"] == 2 * len(answers)
    deadline = time.monotonic() + 120
    while live._running and time.monotonic() < deadline:
        time.sleep(0.2)
    view = live.safety_view(engine, "x")
    assert not view.get("pending") and view["n_ratings"] == 2 * len(answers) * len(criteria)
    inline = live.compute_view(engine, "x")
    assert view["sections"] == inline["sections"]  # the audit's numbers, same seed


def test_rater_counts_by_hand_through_screening_nulls_and_partial_deletes(db_url):
    """``rater_load`` against numbers worked out by hand (not only against the
    recount, which shares its definitions): ratings stored before their answer
    is screened count once it is; a NULL revision is a first rating and a NULL
    time counts as 0; deleting the row with the longest time leaves the next
    longest; a vote without a rater counts for nobody; two studies apart."""
    from clinieval.platform import (
        events,
    )
    from clinieval.storage.schema import platform as platform_tables
    from clinieval.web.testing import make_studies

    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine)
    r, s = snapshot_tables.ratings, platform_tables.answer_screens
    with engine.connect() as conn:
        def answers_of(study):
            return conn.execute(sa.select(snapshot_tables.answers.c.answer_id,
                                          snapshot_tables.answers.c.case_id).join(
                snapshot_tables.cases).where(
                snapshot_tables.cases.c.study_id == study).order_by(
                    snapshot_tables.answers.c.answer_id)).all()
        (a1, case), (a2, _) = answers_of("x")[:2]
        b1 = answers_of("y")[0][0]
        c1, c2, c3 = conn.execute(sa.select(
            snapshot_tables.criteria.c.criterion_id)).scalars().all()[:3]

    def rows(rater, answer, times, revision=None):
        return [{"answer_id": answer, "rater_id": rater, "criterion_id": c, "score": 0,
                 "revision": revision, "time_spent_s": t}
                for c, t in zip((c1, c2), times, strict=True)]

    def kept():
        with engine.connect() as conn:
            stored = counters.stored_raters(conn)
            assert stored == counters.recount_raters(conn)
        return {k: v for k, v in stored.items() if k[1] in ("r1", "r2")}

    with db.writing(engine) as conn:
        conn.execute(snapshot_tables.raters.insert(), [{"rater_id": "r1"}, {"rater_id": "r2"}])
        conn.execute(s.delete().where(s.c.answer_id == a1))  # a1 not screened yet
        conn.execute(r.insert(), rows("r1", a1, [10.0, 12.5]) + rows("r1", a2, [None, None])
                     + rows("r2", b1, [7.0, 7.0], revision=0))
    assert kept() == {("x", "r1"): (1, 0, 0.0), ("y", "r2"): (1, 0, 7000.0)}
    def later(seconds):  # another first rating of r2 on b1, in a statement of its own
        return [{"answer_id": b1, "rater_id": "r2", "criterion_id": c3, "score": 0,
                 "revision": 0, "time_spent_s": seconds}]

    with db.writing(engine) as conn:  # shorter than before: the time stays
        conn.execute(r.insert(), later(6.0))
    assert kept()[("y", "r2")] == (1, 0, 7000.0)
    with db.writing(engine) as conn:  # longer: the answer's time rises to it
        conn.execute(r.delete().where(r.c.criterion_id == c3))
        conn.execute(r.insert(), later(9.25))
    assert kept()[("y", "r2")] == (1, 0, 9250.0)
    with db.writing(engine) as conn:
        conn.execute(s.insert().values(study_id="x", answer_id=a1, status="clear",
                                       screened_at=events.now()))
        conn.execute(r.insert(), rows("r1", a1, [99.0, 99.0], revision=1))  # an edit
    assert kept() == {("x", "r1"): (2, 0, 12500.0), ("y", "r2"): (1, 0, 9250.0)}
    with db.writing(engine) as conn:
        conn.execute(r.delete().where(r.c.answer_id == a1, r.c.criterion_id == c2,
                                      r.c.revision.is_(None)))
    assert kept()[("x", "r1")] == (2, 0, 10000.0)
    with db.writing(engine) as conn:
        conn.execute(r.delete().where(r.c.answer_id == a1, r.c.revision.is_(None)))
        for rater in (None, "r1"):
            conn.execute(snapshot_tables.preferences.insert().values(
                case_id=case, answer_a_id=a1, answer_b_id=a2, shown_left="A", choice="A",
                rater_id=rater, revision=0, created_at=sa.func.now()))
    assert kept()[("x", "r1")] == (1, 1, 0.0)  # a1's edit alone is no first rating
    with db.writing(engine) as conn:
        conn.execute(s.delete().where(s.c.answer_id == a2))
    assert kept() == {("x", "r1"): (0, 1, 0.0), ("y", "r2"): (1, 0, 9250.0)}
    engine.dispose()


@pytest.mark.parametrize("seed", [1, 2])
def test_counters_match_a_recount_after_every_statement_of_a_random_history(db_url, seed):
    """Random statements of several rows each (the same rater and answer more
    than once in one statement, revisions NULL to 2, NULL and fractional
    times), several statements in one transaction, COPY on PostgreSQL, and
    deletions; an answer screened in two studies and one in none. After each
    transaction the stored counters equal a recount."""
    import random

    from clinieval.platform import (
        events,
    )
    from clinieval.storage.schema import platform as platform_tables

    rnd = random.Random(seed)
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine)
    r, s = snapshot_tables.ratings, platform_tables.answer_screens
    with db.writing(engine) as conn:
        def answers_of(study):
            return conn.execute(sa.select(snapshot_tables.answers.c.answer_id).join(
                snapshot_tables.cases).where(
                snapshot_tables.cases.c.study_id == study).order_by(
                    snapshot_tables.answers.c.answer_id)).scalars().all()
        xs, ys = answers_of("x")[:4], answers_of("y")[:2]
        criteria = conn.execute(sa.select(snapshot_tables.criteria.c.criterion_id)
                                .order_by(snapshot_tables.criteria.c.criterion_id)).scalars().all()[:3]
        conn.execute(s.insert().values(study_id="y", answer_id=xs[0], status="clear",
                                       screened_at=events.now()))  # in both studies
        conn.execute(s.delete().where(s.c.answer_id == xs[1]))  # in none
        conn.execute(snapshot_tables.raters.insert(), [{"rater_id": f"r{i}"} for i in range(3)])
    answers, raters = xs + ys, ["r0", "r1", "r2"]
    used: set[tuple] = set()  # (answer, rater, criterion, revision) stored, revision not NULL

    def new_rows(n: int) -> list[dict]:
        rows = []
        for _ in range(n):
            key = (rnd.choice(answers), rnd.choice(raters), rnd.choice(criteria),
                   rnd.choice([None, None, 0, 0, 1, 2]))
            if key[3] is not None and key in used:
                continue
            if key[3] is not None:
                used.add(key)
            rows.append(dict(zip(("answer_id", "rater_id", "criterion_id", "revision"), key,
                                 strict=True), score=0, time_spent_s=rnd.choice(
                [None, 0.0, 0.0004, 1.0, 2.4996, 2.5, 7.0, 10.0])))
        return rows

    postgres = engine.dialect.name == "postgresql"
    for step in range(60):
        op = rnd.choice(["statement", "statement", "several", "delete"] + ["copy"] * postgres)
        with db.writing(engine) as conn:
            if op == "delete":
                gone = conn.execute(sa.select(r.c.rating_id)).scalars().all()
                conn.execute(r.delete().where(r.c.rating_id.in_(
                    rnd.sample(gone, min(len(gone), rnd.randint(1, 4))))))
                used = {tuple(row) for row in conn.execute(sa.select(
                    r.c.answer_id, r.c.rater_id, r.c.criterion_id, r.c.revision)
                    .where(r.c.revision.is_not(None)))}
            elif op == "copy":
                columns = ("answer_id", "rater_id", "criterion_id", "score", "revision",
                           "time_spent_s")
                cursor = conn.connection.driver_connection.cursor()
                with cursor.copy(f"COPY ratings ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in new_rows(rnd.randint(1, 8)):
                        copy.write_row([row[c] for c in columns])
            else:
                for _ in range(rnd.randint(2, 3) if op == "several" else 1):
                    rows = new_rows(rnd.randint(1, 8))
                    if rows:  # one INSERT of all the rows
                        conn.execute(r.insert().values(rows))
        try:
            _same(engine)
        except AssertionError as err:
            raise AssertionError(f"after step {step} ({op})") from err
    engine.dispose()


def test_the_live_view_is_the_audit_of_the_export_with_its_settings(engine, tmp_path):
    """The live view runs on the export's pseudonyms: the audit's two-way
    bootstrap draws raters in the order of their ids, and on the stored ids
    the view's intervals differed from those of `clinieval audit --bootstrap
    200` on the export (a helper found 330 of 1,998 figures apart)."""
    import numpy as np

    from clinieval.audit.run import audit
    from clinieval.platform import (
        live,
        study_export,
    )
    from clinieval.platform.study_export import export_study
    from clinieval.snapshot import Snapshot

    make_studies(engine, overlap=3)
    with engine.connect() as conn:
        answers = conn.execute(sa.select(snapshot_tables.answers.c.answer_id,
                                         snapshot_tables.answers.c.case_id).join(
            snapshot_tables.cases).where(
            snapshot_tables.cases.c.study_id == "x")).all()
        criteria = conn.execute(sa.select(snapshot_tables.criteria.c.criterion_id)).scalars().all()
    rng = np.random.default_rng(4)
    raters = [f"r_live{i}" for i in range(7)]
    ratings = [{"answer_id": a.answer_id, "rater_id": r, "criterion_id": c,
                "score": int(rng.integers(-2, 3)), "revision": 0}
               for r in raters for a in answers if rng.random() < 0.7 for c in criteria]
    by_case: dict[str, list[str]] = {}
    for a in answers:
        by_case.setdefault(a.case_id, []).append(a.answer_id)
    votes = [{"case_id": case, "answer_a_id": ids[0], "answer_b_id": ids[1], "rater_id": r,
              "choice": str(rng.choice(["A", "B", "tie"])), "revision": 0}
             for case, ids in by_case.items() if len(ids) > 1 for r in raters[:3]]
    import_snapshot(engine, Snapshot.from_tables({
        "raters": pa.Table.from_pylist([{"rater_id": r} for r in raters]),
        "ratings": pa.Table.from_pylist(ratings),
        "preferences": pa.Table.from_pylist(votes)}, {}))
    view = live.compute_view(engine, "x")
    assert not view["empty"] and view["n_ratings"] == len(ratings)
    assert view["n_rated"] == len({(r["answer_id"], r["rater_id"]) for r in ratings})
    assert view["settings"]["bootstrap"] == live.LIVE_BOOTSTRAP
    export_study(engine, "x", tmp_path / "export", salt=study_export.export_salt(engine))
    report = audit(tmp_path / "export", bootstrap=view["settings"]["bootstrap"])
    by_key = {s.key: s for s in report.sections}
    compared = 0
    for key, section in view["sections"].items():
        for name, rows in section["tables"].items():
            expected = by_key[key].tables[name].to_dict(orient="records")
            assert len(rows) == len(expected), (key, name)
            for got, want in zip(rows, expected, strict=True):
                for column, value in got.items():
                    if isinstance(value, float):
                        assert value == pytest.approx(float(want[column]), rel=1e-9,
                                                      nan_ok=True), (key, name, column)
                        compared += 1
    assert compared > 300
    # Bootstrap intervals are among them, and not all degenerate.
    bt = view["sections"]["bradley_terry"]["tables"]["strengths"]
    assert any(r["bt_lo"] is not None and r["bt_lo"] < r["bt"] < r["bt_hi"] for r in bt)
