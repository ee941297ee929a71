"""The live safety view shows the judge-calibrated Fail % beside the
clinicians-only one once the study has judgments (issue 32 §3), computed by
the audit's own section as the rest of the view is, on SQLite and
PostgreSQL."""

from __future__ import annotations

import functools
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from jinja2 import Environment, FileSystemLoader

from clinieval.audit.context import Context
from clinieval.audit.data import from_snapshot
from clinieval.audit.run import build
from clinieval.audit.settings import AuditSettings
from clinieval.io.export import pseudonymise
from clinieval.io.importer import import_into
from clinieval.platform import live
from clinieval.platform.study_export import export_salt, study_snapshot
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments


@functools.cache
def _source() -> Snapshot:
    """A synthetic study whose clinicians rated half the answers; the
    planted calibration judge scored every answer they had rated before."""
    snap = plant_judgments(generate(4, 0.08), JudgePlan(seed=5, calibration_judge=True))
    answers = snap["answers"].column("answer_id").to_numpy()
    kept = np.random.default_rng(1).choice(answers, answers.size // 2, replace=False)
    ratings = snap["ratings"].filter(pc.is_in(snap["ratings"]["answer_id"], pa.array(kept)))
    return Snapshot.from_tables(dict(snap.tables) | {"ratings": ratings}, snap.meta)


def _study(engine, snap: Snapshot) -> str:
    """The snapshot imported with the settings row a study made on the
    platform has."""
    study = snap["studies"]["study_id"][0].as_py()
    with db.writing(engine) as conn:
        import_into(conn, snap)
        conn.execute(platform_tables.study_settings.insert().values(
            study_id=study, overlap_target=3, pairwise_share=0.0, lease_minutes=30,
            specialties=json.dumps(sorted(set(snap["cases"]["specialty"].to_pylist()))),
            criteria=json.dumps(snap["criteria"]["criterion_id"].to_pylist()),
            consent_text="", gates=None))
    return study


def _render(view: dict) -> str:
    from clinieval.web import kernel

    env = Environment(loader=FileSystemLoader(kernel.HERE / "templates"), autoescape=True)
    template = env.get_template("admin_safety.html")
    # the page's base template reads the request context; render the block alone
    block = template.blocks["main"]
    ctx = template.new_context({"view": view, "fmt": live.fmt_ci,
                                "crits": live.fail_columns(view),
                                "calibrated": live.calibrated_fails(view)})
    return "".join(block(ctx))


def test_the_live_view_shows_calibrated_fail_beside_clinicians_only(engine):
    study = _study(engine, _source())
    view = live.compute_view(engine, study)
    assert not view["empty"] and "judge_calibrated" in view["sections"]
    rows = live.calibrated_fails(view)
    numbered = [r for r in rows if not r["why_no_estimate"]]
    assert numbered, rows
    for r in numbered:  # both figures, each with its interval and n
        assert r["clinicians_lo"] <= r["clinicians"] <= r["clinicians_hi"]
        assert r["calibrated_lo"] <= r["calibrated_hi"]
        assert r["n_answers"] >= 30 and r["n_judged"] > r["n_answers"] and r["n_ratings"] > 0
    # The same numbers as the audit of the study's export with the view's settings.
    snap = pseudonymise(study_snapshot(engine, study), export_salt(engine))
    ctx = Context(from_snapshot(snap), AuditSettings(bootstrap=live.LIVE_BOOTSTRAP))
    audit = build(ctx, ["judge_calibrated"])["judge_calibrated"].tables["by_criterion"]
    audit = audit[audit["measure"] == "Fail % of ratings"]
    np.testing.assert_allclose([r["calibrated"] for r in numbered],
                               audit.loc[audit["why_no_estimate"] == "", "calibrated"])
    page = _render(view)
    assert 'id="calibrated"' in page and "Clinicians only Fail %" in page
    table = page[page.index('id="calibrated"'):]
    assert f"{numbered[0]['calibrated']:.1f} [{numbered[0]['calibrated_lo']:.1f}" in table
    assert view["settings"]["bootstrap"] == live.LIVE_BOOTSTRAP


def test_without_judgments_the_view_has_no_calibrated_table(engine):
    snap = _source()
    empty = snap["judgments"].slice(0, 0)
    no_judge = Snapshot.from_tables(dict(snap.tables) | {"judgments": empty}, snap.meta)
    study = _study(engine, no_judge)
    view = live.compute_view(engine, study)
    assert not view["empty"] and "judge_calibrated" not in view["sections"]
    assert live.calibrated_fails(view) == []
    assert 'id="calibrated"' not in _render(view)
    with engine.connect() as conn:  # the study is the platform's, settings and all
        assert conn.execute(sa.select(sa.func.count()).select_from(
            platform_tables.study_settings)).scalar_one() == 1
