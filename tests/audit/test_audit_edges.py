"""The audit on awkward snapshots: every section either computes or says why."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from clinieval.audit import audit
from clinieval.audit.data import from_bundle, from_snapshot
from clinieval.io.bundle import read_bundle, write_bundle
from clinieval.snapshot import Snapshot
from clinieval.synth import generate


def _without(snap: Snapshot, table: str, mask) -> Snapshot:
    return Snapshot({**snap.tables, table: snap[table].filter(pa.array(mask))}, snap.meta)


def _answers_of(snap: Snapshot, model: str) -> set[str]:
    answers = snap["answers"].to_pylist()
    return {a["answer_id"] for a in answers if a["model_id"] == model}


@pytest.mark.parametrize("seed", range(6))
def test_tiny_synthetic_scales_never_crash(seed):
    result = audit(generate(seed, 0.004), bootstrap=50)
    assert all(s.skipped or s.summary for s in result.sections)


def test_a_model_without_votes_is_not_given_a_strength():
    snap = generate(1, 0.05)
    gone = _answers_of(snap, "model-c")
    prefs = snap["preferences"].to_pylist()
    keep = [p["answer_a_id"] not in gone and p["answer_b_id"] not in gone for p in prefs]
    result = audit(_without(snap, "preferences", keep), bootstrap=100)
    table = result["bradley_terry"].tables["strengths"].set_index("model")
    name = [m for m in table.index if np.isnan(table.loc[m, "bt"])]
    assert len(name) == 1 and np.isnan(table.loc[name[0], "rank"])
    assert "Not ranked" in result["bradley_terry"].summary
    assert (result["alignment"].tables["alignment"]["n"] == 12).all()
    assert not np.isnan(table.drop(index=name)["bt"]).any()


def test_all_ties_dropped_means_no_preference_ranking():
    snap = generate(2, 0.02)
    prefs = snap["preferences"]
    ties = prefs.set_column(prefs.column_names.index("choice"), "choice",
                            pa.array(["tie"] * prefs.num_rows))
    result = audit(Snapshot({**snap.tables, "preferences": ties}, snap.meta), bootstrap=50,
                   ties="drop")
    assert result["bradley_terry"].skipped and result["alignment"].skipped


def test_rater_clustering_without_rater_ids_falls_back_to_votes():
    snap = generate(3, 0.05)
    prefs = snap["preferences"]
    anonymous = prefs.set_column(prefs.column_names.index("rater_id"), "rater_id",
                                 pa.nulls(prefs.num_rows, pa.string()))
    result = audit(Snapshot({**snap.tables, "preferences": anonymous}, snap.meta),
                   bootstrap=200, cluster="rater")
    table = result["bradley_terry"].tables["strengths"]
    assert ((table["bt_hi"] - table["bt_lo"]) > 0.05).all()
    assert "votes (not raters) were resampled" in result["bradley_terry"].summary


def test_one_criterion_only():
    result = audit(generate(4, 0.05), bootstrap=50, criteria=("accuracy",))
    assert "no other criterion" in result["co_failure"].skipped
    assert list(result["alignment"].tables["alignment"]["criterion"]) == ["Accuracy"]


def test_no_ratings_at_all():
    snap = generate(5, 0.02)
    result = audit(_without(snap, "ratings", [False] * snap["ratings"].num_rows), bootstrap=50)
    assert result["model_summary"].skipped and result["failure_modes"].skipped
    assert result["reliability"].skipped and result["bradley_terry"].skipped is None


def test_snapshot_checksum_does_not_depend_on_the_load_path(tmp_path):
    snap = generate(6, 0.02)
    manifest = write_bundle(snap, tmp_path / "b")
    assert from_snapshot(snap).checksum == manifest["snapshot_sha256"]
    assert from_snapshot(read_bundle(tmp_path / "b")).checksum == manifest["snapshot_sha256"]
    assert from_bundle(tmp_path / "b").checksum == manifest["snapshot_sha256"]


def test_lenient_and_harsh_lists_are_disjoint_with_few_raters():
    result = audit("demo", bootstrap=50)
    tables = result["rater_view"].tables
    assert not set(tables["most_lenient"]["rater"]) & set(tables["harshest"]["rater"])
