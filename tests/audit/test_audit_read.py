"""Reading a bundle for the audit: ratings in many row groups give the same
arrays as the whole snapshot, edits count their latest revisions, and unknown
ids name their row."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from clinieval.audit.data import Coder, codes, from_bundle, from_snapshot
from clinieval.contract import tabular
from clinieval.errors import InputError
from clinieval.io.bundle import content_sha256, file_sha256, snapshot_checksum, write_bundle
from clinieval.snapshot import Snapshot
from clinieval.synth import generate


def _rewrite(folder, name: str, table: pa.Table, row_group_size: int) -> None:
    """Replace a bundle's table file and every checksum of it (the audit
    verifies them all, as an import does)."""
    path = folder / f"{name}.parquet"
    pq.write_table(table, path, row_group_size=row_group_size)
    manifest = json.loads((folder / "manifest.json").read_text())
    entries = manifest["tables"]
    entries[name].update(sha256=file_sha256(path), rows=table.num_rows,
                         content_sha256=content_sha256(table, tabular.BY_NAME[name].key))
    manifest["snapshot_sha256"] = snapshot_checksum(
        {k: v["content_sha256"] for k, v in entries.items()})
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _same(a, b) -> None:
    for name, value in vars(a).items():
        if isinstance(value, np.ndarray):
            other = getattr(b, name)
            assert value.dtype == other.dtype, name
            assert np.array_equal(value, other, equal_nan=value.dtype.kind == "f"), name


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return generate(3, 0.03)


def test_ratings_read_in_row_groups_match_the_snapshot(snap, tmp_path):
    write_bundle(snap, tmp_path / "b")
    # Shuffled rows in many row groups: each group has its own dictionaries.
    ratings = snap["ratings"]
    order = np.random.default_rng(0).permutation(ratings.num_rows)
    _rewrite(tmp_path / "b", "ratings", ratings.take(pa.array(order)), 997)
    shuffled = Snapshot({**snap.tables, "ratings": ratings.take(pa.array(order))}, snap.meta)
    _same(from_bundle(tmp_path / "b"), from_snapshot(shuffled))


def test_edited_ratings_in_a_bundle_count_their_latest_revision(snap, tmp_path):
    ratings = snap["ratings"]
    first = ratings.slice(0, 1)
    edited = first.set_column(first.column_names.index("revision"), "revision",
                              pa.array([1], pa.int16()))
    edited = edited.set_column(edited.column_names.index("score"), "score",
                               pa.array([-2 if first["score"][0].as_py() > -2 else 2], pa.int8()))
    edited = edited.set_column(edited.column_names.index("rating_id"), "rating_id",
                               pa.array([pc.max(ratings["rating_id"]).as_py() + 1], pa.int64()))
    both = Snapshot({**snap.tables, "ratings": pa.concat_tables([ratings, edited])}, snap.meta)
    write_bundle(both, tmp_path / "e")
    _rewrite(tmp_path / "e", "ratings", both["ratings"], 500)
    read = from_bundle(tmp_path / "e")
    assert read.rating_score.size == ratings.num_rows  # the edit replaced, not added
    _same(read, from_snapshot(both))


def test_an_unknown_answer_in_a_later_row_group_names_its_row(snap, tmp_path):
    write_bundle(snap, tmp_path / "u")
    ratings = snap["ratings"]
    row = ratings.num_rows - 3
    ids = ratings["answer_id"].to_pylist()
    ids[row] = "no-such-answer"
    bad = ratings.set_column(ratings.column_names.index("answer_id"), "answer_id",
                             pa.array(ids, pa.string()))
    _rewrite(tmp_path / "u", "ratings", bad, 1000)
    with pytest.raises(InputError) as err:
        from_bundle(tmp_path / "u")
    assert err.value.row == row + 1 and err.value.field == "answer_id"
    assert "no-such-answer" in str(err.value)


def test_coder_reads_growing_shared_and_separate_dictionaries_with_nulls():
    vocabulary = pa.array(["a", "b", "c", "d"])
    values = [["b", None, "a"], ["b", "c", "a", "c"], ["d", "a"], [None]]
    # Chunks 1 and 2 extend one dictionary as a Parquet reader's chunks do;
    # chunk 3 has its own; chunk 4 is plain text.
    shared = pa.array(["b", "a", "c"])
    chunks = [pa.DictionaryArray.from_arrays(pa.array([0, None, 1], pa.int32()), shared[:2]),
              pa.DictionaryArray.from_arrays(pa.array([0, 2, 1, 2], pa.int32()), shared),
              pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array(["d", "a"])),
              pa.array([None], pa.string())]
    coder = Coder(10)
    for chunk in chunks:
        coder.add(chunk)
    assert coder.size == 5  # the shared dictionary's first two entries once
    expected = [vocabulary.to_pylist().index(v) if v else -1 for part in values for v in part]
    assert coder.codes(vocabulary, "t", "f", required=False).tolist() == expected
    again = Coder(10)
    for chunk in chunks:
        again.add(chunk)
    with pytest.raises(InputError) as err:
        again.codes(vocabulary, "t", "f")
    assert err.value.row == 2  # the first null


def test_codes_of_chunked_dictionaries_match_plain_text():
    vocabulary = pa.array([f"id-{i}" for i in range(50)])
    rng = np.random.default_rng(1)
    text = [f"id-{i}" for i in rng.integers(0, 50, 300)]
    chunked = pa.chunked_array([pa.array(text[:120]).dictionary_encode(),
                                pa.array(text[120:]).dictionary_encode()])
    plain = codes(pa.array(text), vocabulary, "t", "f")
    assert plain.tolist() == [int(t[3:]) for t in text]
    assert codes(chunked, vocabulary, "t", "f").tolist() == plain.tolist()
    with pytest.raises(InputError) as err:
        codes(pa.chunked_array([pa.array(["id-1"]).dictionary_encode(),
                                pa.array(["id-2", "zz"]).dictionary_encode()]),
              vocabulary, "t", "f")
    assert err.value.row == 3
