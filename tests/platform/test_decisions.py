"""Decisions (issue 33 §2, §5): per gate x cell, the verdict of the betting
confidence sequence at alpha/2 widened by the rater margin at alpha/2, the
ratings spent and expected, the robustness certificate, the study's line;
served by GET /api/studies/{s}/decisions on SQLite and PostgreSQL."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.audit.context import Context
from clinieval.audit.data import from_snapshot
from clinieval.audit.settings import AuditSettings
from clinieval.io.importer import import_snapshot
from clinieval.platform import decisions, membership
from clinieval.platform.config import Gate
from clinieval.platform.study_export import study_snapshot
from clinieval.snapshot import Snapshot
from clinieval.stats.sequences import betting_cs, decide, rater_margin
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import make_studies, register_via_http

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _stream(x, raters_per_answer: int = 2, n_raters: int = 6) -> decisions.CellStream:
    """Each answer rated by ``raters_per_answer`` raters in rotation, each
    rating agreeing with the answer's value."""
    x = np.asarray(x, dtype=float)
    position = np.repeat(np.arange(x.size), raters_per_answer)
    rater = (np.arange(position.size) % n_raters).astype(np.int64)
    return decisions.CellStream("m", "Cardiology", position, rater, x[position], x)


def test_a_clean_cell_passes_a_failing_one_fails_a_borderline_one_stays_open():
    gate = Gate(criterion="harmlessness", threshold=0.1)
    clean = decisions.cell_decision(_stream(np.zeros(200)), gate, "any")
    assert clean["verdict"] == "pass" and clean["expected_more_ratings"] == 0
    assert clean["answers"] == 200 and clean["ratings"] == 400 and clean["raters"] == 6
    # Removing raters cannot unsettle it until too few answers are left:
    # a certificate of at least one rater, found by the search.
    assert clean["raters_to_unsettle"] >= 1 and clean["certificate"] in ("exact",
                                                                         "greedy_upper_bound")
    bad = decisions.cell_decision(_stream(np.ones(200)), gate, "any")
    assert bad["verdict"] == "fail" and bad["lower"] > 0.1
    rng = np.random.default_rng(3)
    near = decisions.cell_decision(_stream(rng.random(60) < 0.12), gate, "any")
    assert near["verdict"] == "open" and near["raters_to_unsettle"] is None
    assert near["expected_more_ratings"] > 0


def test_the_bounds_are_the_sequence_at_half_alpha_widened_by_the_rater_margin():
    rng = np.random.default_rng(7)
    x = (rng.random(150) < 0.3).astype(float)
    stream = _stream(x, raters_per_answer=3, n_raters=9)
    stream = decisions.CellStream(stream.model, stream.specialty, stream.position,
                                  stream.rater, np.where(rng.random(stream.rater.size) < 0.5,
                                                         stream.value, 0.0), x)
    gate = Gate(criterion="accuracy", threshold=0.5, alpha=0.1)
    row = decisions.cell_decision(stream, gate, "any")
    cs = betting_cs(x, 0.05)
    margin = rater_margin(stream.position, stream.rater, x, 0.05)[-1]
    assert row["rater_margin"] == pytest.approx(margin)
    assert row["lower"] == pytest.approx(max(0, cs.lower[-1] - margin))
    assert row["upper"] == pytest.approx(min(1, cs.upper[-1] + margin))
    assert row["verdict"] == decide(row["lower"], row["upper"], 0.5)
    assert row["estimate"] == pytest.approx(x.mean())


def test_the_study_line_counts_open_decisions_and_ratings_expected():
    rows = [{"verdict": "open", "expected_more_ratings": 300},
            {"verdict": "open", "expected_more_ratings": 40},
            {"verdict": "pass", "expected_more_ratings": 0}]
    assert decisions.study_line(rows) == "2 of 3 decisions open; about 340 more ratings expected"
    rows[0]["expected_more_ratings"] = None
    assert decisions.study_line(rows).endswith("(1 not expected to settle at their current rate)")
    assert decisions.study_line(rows[2:]) == "All 1 decisions settled."


# --- on a study's data -------------------------------------------------------------------

def _answers(engine, study: str) -> list[tuple[str, str]]:
    a, c = snapshot_tables.answers, snapshot_tables.cases
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            sa.select(a.c.answer_id, a.c.model_id).join(c, c.c.case_id == a.c.case_id)
            .where(c.c.study_id == study).order_by(a.c.answer_id)).all()]


def _import(engine, rows: list[dict]) -> None:
    with engine.connect() as conn:
        known = set(conn.execute(sa.select(snapshot_tables.raters.c.rater_id)).scalars())
    new = sorted({r["rater_id"] for r in rows} - known)
    tables = {"raters": pa.Table.from_pylist([{"rater_id": r} for r in new]) if new else None,
              "ratings": pa.Table.from_pylist(rows)}
    import_snapshot(engine, Snapshot.from_tables(tables, {}))


def _ratings(answers, raters, scores: dict[str, int]) -> list[dict]:
    return [{"answer_id": a, "rater_id": r, "criterion_id": c, "score": s, "revision": 0}
            for a in answers for r in raters for c, s in scores.items()]


def test_a_cell_stream_follows_the_first_rating_of_each_answer(engine):
    make_studies(engine)
    answers = [a for a, m in _answers(engine, "x") if m == _answers(engine, "x")[0][1]]
    late, early = answers[0], answers[1]
    _import(engine, _ratings([early], ["r1"], {"harmlessness": -2}))
    _import(engine, _ratings([late], ["r1"], {"harmlessness": 2}))
    _import(engine, _ratings([early], ["r2"], {"harmlessness": 2}))
    ctx = Context(from_snapshot(study_snapshot(engine, "x")), AuditSettings())
    (cell,) = decisions.cell_streams(ctx, Gate(criterion="harmlessness", threshold=0.1))
    assert cell.x.tolist() == [1.0, 0.0]  # early (failed by r1: any rule) first
    assert sorted(zip(cell.position.tolist(), cell.value.tolist(), strict=True)) == [
        (0, 0.0), (0, 1.0), (1, 0.0)]


def _viewer_api(app, engine) -> TestClient:
    c = TestClient(app, follow_redirects=False)
    email = register_via_http(c, engine, "x", "viewer")
    from clinieval.storage.schema import platform as platform_tables

    with engine.connect() as conn:
        uid = conn.execute(sa.select(platform_tables.users.c.user_id).where(
            platform_tables.users.c.email == email)).scalar_one()
    token = membership.create_token(engine, uid, "x", "viewer", "script")
    return TestClient(app, follow_redirects=False, headers={"Authorization": f"Bearer {token}"})


def test_the_api_serves_the_decisions_of_the_studys_gates(app, engine):
    from clinieval.platform.studies import set_gates

    set_gates(engine, None, "x", [
        {"criterion": "harmlessness", "threshold": 0.9, "scope": "model"},
        {"criterion": "accuracy", "threshold": 0.1, "scope": "model"},
        {"criterion": "dangerous", "threshold": 0.3}])
    answers = _answers(engine, "x")
    # Two of six raters per answer in rotation: with the same two raters on
    # every answer the panel is fully crossed and the rater margin is 1.
    _import(engine, [row for i, (a, _) in enumerate(answers)
                     for row in _ratings([a], [f"r{i % 6}", f"r{(i + 1) % 6}"],
                                         {"harmlessness": 2, "accuracy": -2})])
    api = _viewer_api(app, engine)
    body = api.get("/api/studies/x/decisions").json()
    models = {m for _, m in answers}
    rows = body["decisions"]
    assert len(rows) == 3 * len(models)  # one specialty: cells are models for every gate
    verdicts = {(r["criterion"], r["model"]): r["verdict"] for r in rows}
    assert {v for (c, _), v in verdicts.items() if c == "harmlessness"} == {"pass"}
    assert {v for (c, _), v in verdicts.items() if c != "harmlessness"} == {"fail"}
    assert sum(r["ratings"] for r in rows if r["criterion"] == "accuracy") == 2 * len(answers)
    assert body["summary"] == f"All {len(rows)} decisions settled."
    assert body["verdict_rule"].startswith("betting confidence sequence at alpha/2")
    # The certificates come from the background process, merged in when done.
    assert body["certificates"] == "computing"
    assert all(r["raters_to_unsettle"] is None for r in rows)
    deadline = time.monotonic() + 120
    while body["certificates"] != "ready" and time.monotonic() < deadline:
        time.sleep(0.5)
        body = api.get("/api/studies/x/decisions").json()
    assert body["certificates"] == "ready"
    assert [r["verdict"] for r in body["decisions"]] == [r["verdict"] for r in rows]
    assert all(r["raters_to_unsettle"] >= 1 and r["ratings_to_unsettle"] >= 1
               for r in body["decisions"])
