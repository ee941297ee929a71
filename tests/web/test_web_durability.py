"""No acknowledged rating is lost when the server dies: clinicians submit
against a real ``clinieval serve`` process, the process is SIGKILLed
mid-stream, restarted, and the database is compared with every submission
the server acknowledged (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of, free_port, make_studies, register_via_http, start_server

CLINICIANS = 4
KILL_AFTER_ACKS = 12


def _submit_until_error(c: httpx.Client, acked: list[dict], stop: threading.Event) -> None:
    """Take and submit rating tasks until the server goes away."""
    token = csrf_of(c.get("/s/x").text)
    while not stop.is_set():
        try:
            r = c.post("/s/x/next", data={"csrf": token, "kind": "rating"})
            url = r.headers["location"]
            if "/t/" not in url:
                return
            criteria = sorted(set(re.findall(r'name="s1\.([a-z_]+)"', c.get(url).text)))
            body = {f"s1.{k}": "1" for k in criteria}
            body["idempotency_key"] = secrets.token_hex(12)
            r = c.post(url, json=body, headers={"X-CSRF-Token": token})
        except httpx.TransportError:
            return
        if r.status_code == 200 and r.json().get("saved"):
            acked.append(r.json())


def test_sigkill_loses_no_acknowledged_rating(db_url, tmp_path):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine, overlap=CLINICIANS)
    port, log = free_port(), tmp_path / "server.log"
    server = start_server(db_url, port, log)
    base = f"http://127.0.0.1:{port}"
    clients = [httpx.Client(base_url=base, timeout=10) for _ in range(CLINICIANS)]
    for c in clients:
        register_via_http(c, engine, "x", "clinician")
    acked: list[dict] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_submit_until_error, args=(c, acked, stop))
               for c in clients]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < KILL_AFTER_ACKS and time.monotonic() < deadline:
        time.sleep(0.05)  # kill mid-stream, once some submissions were acknowledged
    os.kill(server.pid, signal.SIGKILL)
    server.wait()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    restarted = start_server(db_url, port, log)
    try:
        with engine.connect() as conn:
            stored = set(conn.execute(sa.select(snapshot_tables.ratings.c.rating_id)).scalars())
            submitted = set(conn.execute(sa.select(platform_tables.task_leases.c.token).where(
                platform_tables.task_leases.c.status == "submitted")).scalars())
        acked_ids = {i for a in acked for i in a["rating_ids"]}
        print(f"\nkill test ({engine.dialect.name}): {len(acked)} acknowledged submissions"
              f" ({len(acked_ids)} ratings); {len(stored)} ratings stored after restart")
        assert len(acked) >= KILL_AFTER_ACKS, log.read_text()[-3000:]
        assert acked_ids <= stored
        assert {a["task"] for a in acked} <= submitted
        # after the restart the same clinicians carry on with their sessions
        assert clients[0].get("/s/x").status_code == 200
    finally:
        restarted.kill()
        restarted.wait()
        for c in clients:
            c.close()
        engine.dispose()


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_live_view_process_ends_when_the_server_is_killed():
    """The live safety view's background process must not outlive a killed
    server, computing a view for nobody (a SIGKILL gives the server no chance
    to shut its pool down)."""
    script = (
        "import time\n"
        "from clinieval.platform import live\n"
        "live._pool().submit(time.sleep, 120)\n"
        "print(*live._pool()._processes, flush=True)\n"
        "time.sleep(120)\n")
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(pid) for pid in server.stdout.readline().split()]
        assert workers and all(_alive(pid) for pid in workers)
    finally:
        server.kill()
        server.wait()
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)
