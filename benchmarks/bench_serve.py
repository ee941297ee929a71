"""The platform under load: a real ``clinieval serve`` (uvicorn) on a database
holding a synthetic MOOVE-like study (``--scale 1`` is paper scale: 13 models,
76 specialties, 736 clinicians, 375,614 ratings), driven over loopback by
simulated clinicians (httpx async) who take a task, submit ratings (or a vote
and both ratings for a pair) with the next task coming back in the submission's
result (as the task page's form asks for it) or, one time in ten, from the
task list's "next task", and now and then edit. Bounded in clinicians,
submissions and seconds; measured after a warm-up. Prints submissions per
second, p50/p99 of "next task" and "submit", admin progress and live-view
latency, then compares the database with every acknowledged submission (the
warm-up's too): lost, duplicated, over-assigned.

    python benchmarks/bench_serve.py [--scale 1.0] [--clinicians 200] [--seconds 60]
        [--warmup 5] [--think 0] [--max-submissions 20000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.cookiejar
import json
import math
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa

from clinieval.io.importer import import_snapshot
from clinieval.platform import accounts, events
from clinieval.platform.studies import store_rubric_version
from clinieval.rubric import rubric_from_rows
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.synth import STUDY_ID, generate
from clinieval.web.kernel import Signer, platform_key
from clinieval.web.testing import free_port, start_server, wait_until_serving

_random = secrets.SystemRandom()
EDIT_SHARE = 0.05
PAIR_SHARE = 0.05
SEPARATE_NEXT_SHARE = 0.1
"""Submissions after which the clinician goes back to the task list and asks
for the next task there (the others get it with the submission's result)."""


def seed(url: str, scale: float, clinicians: int) -> tuple[dict, int]:
    """Load the synthetic study, open it on the platform (every answer clear,
    room for two more raters per answer) and give ``clinicians`` simulated
    clinicians a session; returns their cookies and the overlap target."""
    engine = db.make_engine(url)
    db.upgrade(engine)
    started = time.perf_counter()
    snap = generate(seed=7, scale=scale)
    import_snapshot(engine, snap, replace=True)
    with engine.connect() as conn:
        per_answer = conn.execute(sa.select(sa.func.count(sa.distinct(
            snapshot_tables.ratings.c.rater_id)))
                                  .group_by(snapshot_tables.ratings.c.answer_id)).scalars().all()
    target = max(per_answer, default=0) + 2
    specialties = sorted(set(snap["cases"]["specialty"].to_pylist()))
    criteria = snap["criteria"]["criterion_id"].to_pylist()
    # The rubric's texts are stored as a version, as `study create` does.
    rubric = rubric_from_rows(snap["criteria"].to_pylist(), {"rubric_id": "bench",
                                                             "version": "1"})
    now = events.now()
    with db.writing(engine) as conn:
        conn.execute(platform_tables.study_settings.insert().values(
            study_id=STUDY_ID, overlap_target=target, pairwise_share=PAIR_SHARE,
            lease_minutes=30, specialties=json.dumps(specialties),
            criteria=json.dumps(criteria), consent_text="bench"))
        conn.execute(platform_tables.study_rubrics.insert().values(
            study_id=STUDY_ID, rubric_id="bench", version="1", rationale_required=False))
        store_rubric_version(conn, STUDY_ID, rubric)
        conn.execute(platform_tables.answer_screens.insert(), [
            {"study_id": STUDY_ID, "answer_id": a, "status": "clear", "screened_at": now}
            for a in snap["answers"]["answer_id"].to_pylist()])
        leases = _history(conn, snap["raters"]["rater_id"].to_pylist(), now)
    people = _specialties_of(snap["cases"]["specialty"].to_pylist(), max(clinicians, 1))
    signer = Signer(platform_key(engine))
    cookies = {}
    for i in range(clinicians + 1):
        role = "admin" if i == clinicians else "clinician"
        user_id, rater_id = f"u_bench{i}", f"r_bench{i}"
        with db.writing(engine) as conn:
            conn.execute(snapshot_tables.raters.insert().values(rater_id=rater_id,
                                                  specialty=people[i % len(people)]))
            conn.execute(platform_tables.users.insert().values(
                user_id=user_id, email=f"b{i}@example.org", rater_id=rater_id,
                password_hash="not-a-login", created_at=now))
            conn.execute(platform_tables.memberships.insert().values(study_id=STUDY_ID,
                                                                     user_id=user_id,
                                                       role=role, consented_at=now))
        token = accounts.open_session(engine, user_id)
        cookies[role if role == "admin" else user_id] = (signer.sign(token), signer.csrf(token))
    if engine.dialect.name == "postgresql":
        # A running study's tables have planner statistics; a database loaded a moment ago
        # has none until autovacuum gets to it in the middle of the run.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    engine.dispose()
    print(f"seeded {snap['ratings'].num_rows:,} ratings by {len(snap['raters']):,} clinicians"
          f" (with the {leases:,} submitted tasks they came from), {len(specialties)}"
          f" specialties, overlap target {target} in {time.perf_counter() - started:.1f} s")
    return cookies, target


def _specialties_of(case_specialties: list[str], clinicians: int) -> list[str]:
    """The simulated clinicians' specialties, in proportion to each specialty's
    cases (largest remainders), as a study recruits: spread evenly over 76
    specialties, a third of them ran out of answers in their small specialty
    within seconds and stopped, and the load dropped with them."""
    counts: dict[str, int] = {}
    for specialty in case_specialties:
        counts[specialty] = counts.get(specialty, 0) + 1
    total = len(case_specialties)
    quotas = {sp: clinicians * n / total for sp, n in counts.items()}
    seats = {sp: int(q) for sp, q in quotas.items()}
    for sp in sorted(quotas, key=lambda sp: (seats[sp] - quotas[sp], sp))[
            :clinicians - sum(seats.values())]:
        seats[sp] += 1
    return [sp for sp in sorted(seats) for _ in range(seats[sp])]


def _history(conn: sa.Connection, raters: list[str], now) -> int:
    """The platform rows a study that collected the imported data would hold:
    an account and membership per rater and a submitted task per vote (with
    its two answers' ratings) and per answer rated on its own. Without them
    the lease table starts empty, unlike a running study's, and PostgreSQL
    plans the assignment for an empty table (its statistics come from the
    ANALYZE after seeding)."""
    r, p, tl = snapshot_tables.ratings, snapshot_tables.preferences, platform_tables.task_leases
    conn.execute(platform_tables.users.insert(), [
        {"user_id": f"u_hist_{x}", "email": f"hist_{x}@example.org", "rater_id": x,
         "password_hash": "not-a-login", "created_at": now} for x in raters])
    conn.execute(platform_tables.memberships.insert(), [
        {"study_id": STUDY_ID, "user_id": f"u_hist_{x}", "role": "clinician",
         "consented_at": now} for x in raters])
    past = now - timedelta(days=30)
    # A pair task gives both answers' ratings (they carry its vote's id as review_id)
    # and the vote; a rating task one answer's ratings. Edits are revisions, not tasks.
    rated = (sa.select(r.c.rater_id, r.c.answer_id).distinct()
             .where(r.c.review_id.is_(None)).subquery())
    columns = ["token", "study_id", "user_id", "kind", "answer_id", "answer_b_id",
               "shown_left", "status", "created_at", "expires_at", "preference_id"]
    conn.execute(tl.insert().from_select(columns, sa.select(
        "hist_" + rated.c.rater_id + "_" + rated.c.answer_id, sa.literal(STUDY_ID),
        "u_hist_" + rated.c.rater_id, sa.literal("rating"), rated.c.answer_id,
        sa.null(), sa.null(), sa.literal("submitted"), sa.literal(past, tl.c.created_at.type),
        sa.literal(past, tl.c.expires_at.type), sa.null())))
    conn.execute(tl.insert().from_select(columns, sa.select(
        "histp_" + sa.cast(p.c.preference_id, sa.Text), sa.literal(STUDY_ID),
        "u_hist_" + p.c.rater_id, sa.literal("pair"), p.c.answer_a_id, p.c.answer_b_id,
        p.c.shown_left, sa.literal("submitted"), sa.literal(past, tl.c.created_at.type),
        sa.literal(past, tl.c.expires_at.type), p.c.preference_id).where(
        sa.func.coalesce(p.c.revision, 0) == 0, p.c.rater_id.is_not(None))))
    return conn.execute(sa.select(sa.func.count()).select_from(tl)).scalar_one()


class Run:
    def __init__(self, deadline: float, max_submissions: int, think: float = 0.0,
                 measure_from: float = 0.0) -> None:
        self.deadline, self.left, self.think = deadline, max_submissions, think
        self.measure_from = measure_from  # time.monotonic() at which the warm-up ends
        self.measured = 0  # submissions acknowledged after the warm-up
        self.next_ms: list[float] = []
        self.page_ms: list[float] = []
        self.submit_ms: list[float] = []
        self.requests = 0
        self.acked: list[tuple[str, str, str]] = []  # (user, token, kind)
        self.errors: dict[str, int] = {}

    def measuring(self) -> bool:
        """Past the warm-up: times and counts are kept (every submission is
        checked against the database either way)."""
        return time.monotonic() >= self.measure_from

    def going(self) -> bool:
        return time.monotonic() < self.deadline and self.left > 0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


async def clinician(client: httpx.AsyncClient, user: str, cookie: tuple[str, str],
                    run: Run) -> None:
    """One simulated clinician; a request that times out counts as an error
    (its submission, if any, is not acknowledged)."""
    try:
        await _clinician(client, user, cookie, run)
    except httpx.TransportError as err:
        run.error(type(err).__name__)


async def _clinician(c: httpx.AsyncClient, user: str, cookie: tuple[str, str], run: Run) -> None:
    signed, csrf = cookie
    # The session cookie goes in a header of its own: the shared client keeps no cookie jar
    # for 200 people, and nothing is parsed or merged per request.
    headers = {"Cookie": f"ce_session={signed}", "X-CSRF-Token": csrf,
               "Accept": "application/json"}
    page_headers = {**headers, "Accept": "text/html"}
    form_headers = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    next_body = {kind: f"csrf={csrf}&kind={kind}".encode() for kind in ("pair", "rating")}
    url = None  # the task in hand: from "next task", or given with the last submission
    while run.going():
        if run.think:  # reading and rating take a clinician a while
            await asyncio.sleep(min(_random.expovariate(1 / run.think),
                                    max(run.deadline - time.monotonic(), 0)))
            if not run.going():
                break
        kind = "pair" if secrets.randbelow(100) < PAIR_SHARE * 100 else "rating"
        if url is None:
            t0, timed = time.perf_counter(), run.measuring()
            r = await c.post(f"/s/{STUDY_ID}/next", content=next_body[kind], headers=form_headers)
            if run.measuring():
                run.requests += 1
                if timed:
                    run.next_ms.append(1000 * (time.perf_counter() - t0))
            if r.status_code != 303 or "/t/" not in r.headers.get("location", ""):
                run.error(f"next {kind} {r.status_code}")
                if kind == "rating":
                    return  # nothing left for this clinician (a small specialty ran out)
                continue
            url = r.headers["location"]
        t0, timed = time.perf_counter(), run.measuring()
        page = await c.get(url, headers=page_headers)
        # A request counts (for the rates and CPU per request) when it ends after the
        # warm-up; its time only when it also began after it: the first requests queue
        # behind all 200 clinicians' first "next task" at once, which on a slow machine
        # ends seconds later, after a warm-up of 5 s.
        if run.measuring():
            run.requests += 1
            if timed:
                run.page_ms.append(1000 * (time.perf_counter() - t0))
        names = sorted(set(re.findall(r'name="(s[12]\.[a-z_]+)"', page.text)))
        body = {n: str(secrets.choice((-1, 0, 1, 2))) for n in names}
        body |= {"idempotency_key": secrets.token_urlsafe(12), "time_spent_s": 40}
        if any(n.startswith("s2.") for n in names):
            body["choice"] = secrets.choice(("A", "B", "tie"))
        run.left -= 1
        # The next task mostly comes with the result (as the task page's form asks for it).
        separate = secrets.randbelow(100) < SEPARATE_NEXT_SHARE * 100
        t0, timed = time.perf_counter(), run.measuring()
        r = await c.post(url, json=body if separate else body | {"next": kind}, headers=headers)
        measuring = run.measuring()
        if measuring:
            run.requests += 1
            if timed:
                run.submit_ms.append(1000 * (time.perf_counter() - t0))
        if r.status_code != 200:
            run.error(f"submit {r.status_code}")
            url = None
            continue
        done, url = url, None if separate else r.json()["next"]
        run.acked.append((user, done.rsplit("/", 1)[1], "pair" if "choice" in body else
                          "rating"))
        run.measured += measuring
        if secrets.randbelow(100) < EDIT_SHARE * 100:  # an edit adds a revision
            body["idempotency_key"] = secrets.token_urlsafe(12)
            if (await c.post(done, json=body, headers=headers)).status_code != 200:
                run.error("edit")
            run.requests += run.measuring()


async def admin(c: httpx.AsyncClient, cookie: tuple[str, str], run: Run, times: dict) -> None:
    headers = {"Cookie": f"ce_session={cookie[0]}"}
    while run.going():
        for page in ("progress", "safety"):
            t0, timed = time.perf_counter(), run.measuring()
            try:
                r = await c.get(f"/s/{STUDY_ID}/{page}", headers=headers, timeout=120)
            except httpx.TransportError as err:
                run.error(f"{page} {type(err).__name__}")
                continue
            if timed:
                times[page].append(1000 * (time.perf_counter() - t0))
            if r.status_code != 200:
                run.error(f"{page} {r.status_code}")
        await asyncio.sleep(1.0)


async def drive(base: str, cookies: dict, clinicians: int, seconds: float,
                max_submissions: int, think: float, server_pid: int, url: str,
                warmup: float = 0.0
                ) -> tuple[Run, dict, float, tuple[float, float, float, float | None]]:
    """Run the clinicians and the admin for ``warmup`` + ``seconds``; returns
    the run, the admin's page times, the measured seconds (after the warm-up)
    and the CPU seconds spent meanwhile by the server, its live-view process,
    this client process and the database's backends (PostgreSQL on this
    machine; else None)."""
    times: dict[str, list[float]] = {"progress": [], "safety": []}
    users = [u for u in cookies if u != "admin"][:clinicians]
    # A client per simulated person, each with one keep-alive HTTP/1.1 connection:
    # one shared client's pool costs more CPU per request the more connections it
    # holds (it walks them all), 2-3x the per-request client CPU at 200 people.
    # No cookie jar: each sends its own session cookie in a header.
    # Plain HTTP on loopback: no TLS context (and CA bundle) loaded per client.
    # A connection idle for 4 s is not reused: the server closes idle ones after 5 s, and
    # reusing one just then failed the request (RemoteProtocolError) now and then.
    clients = [httpx.AsyncClient(base_url=base, timeout=60, cookies=_NoCookies(), verify=False,
                                 limits=httpx.Limits(max_connections=1, keepalive_expiry=4.0))
               for _ in range(len(users) + 1)]
    # No cyclic collection in this process while it drives: its full passes over
    # 200 clients and their garbage took 60-200 ms every few seconds here, pauses
    # that the requests in flight counted as server latency. Collected afterwards.
    gc.collect()
    gc.disable()
    now = time.monotonic()
    run = Run(now + warmup + seconds, max_submissions, think, measure_from=now + warmup)
    mark = {}

    async def start_measuring() -> None:
        await asyncio.sleep(warmup)
        mark["at"], mark["client"] = time.perf_counter(), time.process_time()
        mark["cpu"] = cpu_seconds(server_pid)
        mark["db"] = await asyncio.to_thread(backends_cpu, url)

    watching = asyncio.ensure_future(admin(clients[-1], cookies["admin"], run, times))
    try:
        await asyncio.gather(start_measuring(),
                             *(clinician(c, u, cookies[u], run)
                               for c, u in zip(clients, users, strict=False)))
        # The clock stops with the last clinician (the admin may be between two looks).
        elapsed = time.perf_counter() - mark["at"]
        after, client_cpu = cpu_seconds(server_pid), time.process_time() - mark["client"]
        db_after = backends_cpu(url)
        db_cpu = None if db_after is None else sum(
            cpu - (mark["db"] or {}).get(pid, 0.0) for pid, cpu in db_after.items())
        return run, times, elapsed, (*cpu_between(mark["cpu"], after), client_cpu, db_cpu)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        gc.enable()
        for c in clients:
            await c.aclose()


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing: a cookie a response sets must not reach the
    other simulated people sharing the client."""

    def extract_cookies(self, response, request) -> None:
        return None

    def add_cookie_header(self, request) -> None:
        return None


def check(url: str, run: Run, target: int) -> dict[str, int]:
    """Every acknowledged submission against the database."""
    engine = db.make_engine(url)
    tl, u = platform_tables.task_leases, platform_tables.users
    r, p = snapshot_tables.ratings, snapshot_tables.preferences
    with engine.connect() as conn:
        leases = {row.token: row for row in conn.execute(
            sa.select(tl, u.c.rater_id).join(u, u.c.user_id == tl.c.user_id).where(
                tl.c.token.in_([t for _, t, _ in run.acked])))}
        lost = 0
        for _, token, _ in run.acked:
            lease = leases.get(token)
            ids = [x for x in (lease.answer_id, lease.answer_b_id) if x] if lease else []
            stored = conn.execute(sa.select(sa.func.count(sa.distinct(r.c.answer_id))).where(
                r.c.answer_id.in_(ids), r.c.rater_id == lease.rater_id,
                r.c.revision == 0)).scalar_one() if lease else 0
            lost += lease is None or lease.status != "submitted" or stored != len(ids)
        duplicated = conn.execute(sa.select(sa.func.count()).select_from(
            sa.select(r.c.answer_id).where(r.c.rater_id.like("r_bench%"))
            .group_by(r.c.answer_id, r.c.rater_id, r.c.criterion_id, r.c.revision)
            .having(sa.func.count() > 1).subquery())).scalar_one()
        duplicated += conn.execute(sa.select(sa.func.count()).select_from(
            sa.select(p.c.rater_id).where(p.c.rater_id.like("r_bench%"))
            .group_by(p.c.rater_id, p.c.answer_a_id, p.c.answer_b_id, p.c.revision)
            .having(sa.func.count() > 1).subquery())).scalar_one()
        # Each answer's own target: the study's plus the raters an alarm on a
        # safety-critical criterion added (answer_priorities.extra; a table the code
        # before escalation does not have, where every answer has the plain target).
        touched = sa.select(r.c.answer_id).where(r.c.rater_id.like("r_bench%"))
        raters = (sa.select(r.c.answer_id, sa.func.count(sa.distinct(r.c.rater_id)).label("n"))
                  .where(r.c.answer_id.in_(touched)).group_by(r.c.answer_id).subquery())
        has_extra = "answer_priorities" in sa.inspect(conn).get_table_names()
        if has_extra:
            ap = platform_tables.answer_priorities
            extra = sa.func.coalesce(sa.select(ap.c.extra).where(
                ap.c.answer_id == raters.c.answer_id,
                ap.c.study_id == STUDY_ID).scalar_subquery(), 0)
        else:
            extra = sa.literal(0)
        over, above_plain, escalated = conn.execute(sa.select(
            sa.func.coalesce(sa.func.sum(sa.case((raters.c.n > target + extra, 1), else_=0)), 0),
            sa.func.coalesce(sa.func.sum(sa.case((raters.c.n > target, 1), else_=0)), 0),
            sa.func.coalesce(sa.func.sum(sa.case((extra > 0, 1), else_=0)), 0))).one()
    engine.dispose()
    return {"acknowledged": len(run.acked), "lost": lost, "duplicated": duplicated,
            "over_assigned": int(over), "escalated_answers": int(escalated),
            "above_plain_target_escalated": int(above_plain)}


def cpu_seconds(pid: int) -> dict[int, tuple[float, bool]]:
    """User + system CPU seconds of a process and each of its live descendants
    (Linux /proc), each with whether it runs niced (the low-priority background
    process computing the live safety view)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        stats[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]),
                                  int(fields[16]))
    tree = {pid}
    for _ in range(4):  # server -> workers -> live-view process
        tree |= {p for p, (parent, _, _) in stats.items() if parent in tree}
    tick = os.sysconf("SC_CLK_TCK")
    # Niced relative to the server: the benchmark itself may run niced (the server then
    # inherits its nice value, and the live-view process adds its own 10 to it).
    base = stats[pid][2] if pid in stats else 0
    return {p: (stats[p][1] / tick, stats[p][2] > base) for p in tree if p in stats}


def cpu_between(before: dict, after: dict) -> tuple[float, float]:
    """CPU seconds spent between two :func:`cpu_seconds` samples, serving
    requests and in the background: per process, classified by the later
    sample (the live-view process lowers its priority just after it starts)."""
    spent = {"serving": 0.0, "background": 0.0}
    for p, (cpu, niced) in after.items():
        spent["background" if niced else "serving"] += cpu - before.get(p, (0.0, False))[0]
    return spent["serving"], spent["background"]


def backends_cpu(url: str) -> dict[int, float] | None:
    """CPU seconds so far of each PostgreSQL backend serving the benchmark's
    database (its server's connections), when that server runs on this
    machine; None for SQLite or a remote server."""
    if not url.startswith("postgresql"):
        return None
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            pids = conn.execute(sa.text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")).scalars().all()
    finally:
        engine.dispose()
    tick, found = os.sysconf("SC_CLK_TCK"), {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = sum(int(x) for x in fields[11:13]) / tick
    return found or None


def start_uvicorn(url: str, port: int, workers: int, log: Path) -> subprocess.Popen:
    """uvicorn with ``workers`` processes on the app factory, once it answers."""
    command = [sys.executable, "-m", "uvicorn", "--factory", "clinieval.web.app:from_environment",
               "--port", str(port), "--workers", str(workers), "--log-level", "warning"]
    # A session of its own: stopping it stops its worker processes too (killed alone,
    # uvicorn's supervisor left them serving, each with its pool of PostgreSQL
    # connections and its live-view process, into the next run).
    proc = subprocess.Popen(command, env={**os.environ, "DATABASE_URL": url},
                            stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    return wait_until_serving(proc, port, log)


def stop(server: subprocess.Popen) -> None:
    """Kill the server, and with several workers every process of its session."""
    if os.getpgid(server.pid) == server.pid:
        os.killpg(server.pid, signal.SIGKILL)
    else:
        server.kill()
    server.wait()


def _event_loop():
    """uvloop for the simulated clinicians too where it is installed (it is a
    dependency of the server): the event loop is a large part of the client's
    CPU per request, and the client shares the cores with the server."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 \
        else values[0]


def bench(url: str, args) -> None:
    cookies, target = seed(url, args.scale, args.clinicians)
    if args.assignment != "even":
        # Decision-targeted assignment: the default gates, the first priorities written
        # before the server starts, later ones refreshed off the request path.
        # The gates are those `study create` gives a study by default (each
        # safety-critical criterion per model x specialty): without them the background
        # pass has no decision to compute and every answer is as urgent as any other.
        from clinieval.platform.config import default_gates, gates_json
        from clinieval.platform.targeting import set_assignment

        engine = db.make_engine(url)
        with db.writing(engine) as conn:
            critical = conn.execute(sa.select(snapshot_tables.criteria.c.criterion_id).where(
                snapshot_tables.criteria.c.safety_critical.is_(True))).scalars().all()
            gates = default_gates(critical)
            conn.execute(platform_tables.study_settings.update().where(
                platform_tables.study_settings.c.study_id == STUDY_ID).values(
                gates=gates_json(gates)))
        started = time.perf_counter()
        set_assignment(engine, None, STUDY_ID, assignment=args.assignment,
                       monitor_share=args.monitor_share)
        with engine.connect() as conn:
            offers = conn.execute(sa.select(platform_tables.assignment_offers.c.offer).where(
                platform_tables.assignment_offers.c.study_id == STUDY_ID)).scalars().all()
        engine.dispose()
        print(f"assignment {args.assignment}, monitor share {args.monitor_share:g}, gates"
              f" {', '.join(f'{g.criterion} {g.scope} <= {g.threshold:g}' for g in gates)}:"
              f" first priorities in {time.perf_counter() - started:.1f} s;"
              f" {sum(o >= 1 for o in offers)} of {len(offers)} specialties with an open"
              f" decision")
    port = free_port()
    log = Path(tempfile.mkdtemp()) / "server.log"
    server = (start_server(url, port, log) if args.workers == 1
              else start_uvicorn(url, port, args.workers, log))
    try:
        with asyncio.Runner(loop_factory=_event_loop()) as runner:
            run, times, elapsed, cpu = runner.run(drive(
                f"http://127.0.0.1:{port}", cookies, args.clinicians, args.seconds,
                args.max_submissions, args.think, server.pid, url, args.warmup))
        server_cpu, live_cpu, client_cpu, db_cpu = cpu
    finally:
        stop(server)
    name = url.split(":", 1)[0]
    requests, subs = max(run.requests, 1), max(run.measured, 1)
    print(f"{name}: CPU seconds while driving: server {server_cpu:.1f}, live-view process"
          f" {live_cpu:.1f} (niced; what finished of it), clients {client_cpu:.1f};"
          f" {requests / subs:.2f} requests per submission; per request: server"
          f" {1000 * server_cpu / requests:.2f} ms, client {1000 * client_cpu / requests:.2f} ms"
          + ("" if db_cpu is None else f", database backends {1000 * db_cpu / requests:.2f} ms")
          + f"; per submission: server {1000 * server_cpu / subs:.2f} ms, client"
          f" {1000 * client_cpu / subs:.2f} ms"
          + ("" if db_cpu is None else f", database backends {1000 * db_cpu / subs:.2f} ms")
          + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{name}: {run.measured:,} acknowledged submissions in {elapsed:.1f} s ="
          f" {run.measured / elapsed:.0f} submissions/s with {args.clinicians} clinicians"
          f" after a {args.warmup:g} s warm-up"
          f" (think time {args.think:g} s, {args.workers} server process(es))")
    print(f"{name}: next task (from the task list) p50 {pct(run.next_ms, 50):.0f} ms, p99"
          f" {pct(run.next_ms, 99):.0f} ms over {len(run.next_ms)}; task page p50"
          f" {pct(run.page_ms, 50):.0f} ms, p99 {pct(run.page_ms, 99):.0f} ms;"
          f" submit p50 {pct(run.submit_ms, 50):.0f} ms,"
          f" p99 {pct(run.submit_ms, 99):.0f} ms")
    for page, values in times.items():
        print(f"{name}: {page} page p50 {pct(values, 50):.0f} ms, max"
              f" {max(values, default=float('nan')):.0f} ms over {len(values)} loads")
    print(f"{name}: {check(url, run, target)}; errors {run.errors}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--clinicians", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-submissions", type=int, default=20_000)
    parser.add_argument("--postgres", default=os.environ.get("CLINIEVAL_TEST_POSTGRES_URL"))
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--workers", type=int, default=1,
                        help="uvicorn worker processes (1: `clinieval serve` itself)")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds of load before measuring (first compiles, cold caches, the"
                             " live view's first computation); their submissions are checked too")
    parser.add_argument("--think", type=float, default=0.0,
                        help="mean seconds a clinician spends between two tasks (0: none)")
    parser.add_argument("--assignment", default="even", choices=("even", "targeted"),
                        help="the study's assignment (targeted: decision-targeted, the default"
                             " gates)")
    parser.add_argument("--monitor-share", type=float, default=0.9,
                        help="with targeted assignment, the share of tasks kept for settled"
                             " cells: the seeded study has ratings enough to settle nearly every"
                             " cell, so at the study's default (0.1) most clinicians would get no"
                             " task at all; a high share keeps them rating through the targeted"
                             " path")
    args = parser.parse_args()
    loop_s, trip_us = yardstick()
    print(f"machine: a pure-Python loop of 5 million additions {loop_s:.2f} s; a message to"
          f" another thread and back over a socket pair {trip_us:.0f} us (best of 3 each;"
          f" yardsticks for comparing figures from different machines, which differ twofold"
          f" between 2-core VMs of the same kind; the round trip also varies with the load)")
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            bench(f"sqlite:///{tmp}/bench.db", args)
    if args.postgres:
        bench_postgres(args.postgres, args)


def yardstick() -> tuple[float, float]:
    """Two fixed measures of the machine, best of three: seconds for pure-Python
    work, and microseconds for a round trip to another thread over a socket
    pair (system calls and a thread switch each way, as in every request and
    every statement sent to PostgreSQL)."""
    loop = trip = math.inf
    for _ in range(3):
        started, total = time.perf_counter(), 0
        for i in range(5_000_000):
            total += i
        loop = min(loop, time.perf_counter() - started)
    a, b = socket.socketpair()

    def echo() -> None:
        while data := b.recv(16):
            b.sendall(data)

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            started = time.perf_counter()
            for _ in range(5_000):
                a.sendall(b"x")
                a.recv(16)
            trip = min(trip, (time.perf_counter() - started) / 5_000 * 1e6)
    finally:
        a.close()
        thread.join()
        b.close()
    return loop, trip


def bench_postgres(base: str, args) -> None:
    """In a fresh schema of the given database, dropped afterwards."""
    schema = f"bench_serve_{secrets.token_hex(4)}"
    admin_engine = sa.create_engine(base)
    with admin_engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        sep = "&" if "?" in base else "?"
        bench(f"{base}{sep}options=-csearch_path%3D{schema}", args)
    finally:
        with admin_engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin_engine.dispose()


if __name__ == "__main__":
    main()
