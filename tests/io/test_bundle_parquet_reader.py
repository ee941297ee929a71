"""The bundle's Parquet reader reads a file as one file (not through
``pq.read_table``'s dataset layer) and must accept, return and refuse exactly
what ``pq.read_table`` does, with the same words; a bundle whose file cannot
be read is refused naming it, never with a traceback."""

from __future__ import annotations

import hashlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from clinieval.errors import InputError
from clinieval.io.bundle import MANIFEST, _read_parquet, content_sha256, read_bundle, write_bundle
from clinieval.testing import tiny_snapshot


def _parquet(table: pa.Table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def _outcome(read, raw: bytes):
    """What a reader makes of ``raw``: the table (one chunk per column), or
    the error's type and words."""
    try:
        data = read(raw)
        data.validate(full=True)
        return "read", data.combine_chunks()
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        return type(err).__name__, str(err)


def _read_table(raw: bytes) -> pa.Table:
    return pq.read_table(pa.BufferReader(raw), use_threads=False, pre_buffer=False)


def _same(raw: bytes) -> None:
    ours, theirs = _outcome(_read_parquet, raw), _outcome(_read_table, raw)
    assert ours[0] == theirs[0]
    if ours[0] == "read":
        assert ours[1].equals(theirs[1], check_metadata=True)
    else:
        assert ours[1] == theirs[1]


SAMPLE = _parquet(pa.table({
    "rating_id": pa.array(range(40), pa.int64()),
    "answer_id": [f"a{i % 7}" for i in range(40)],
    "comment": [None if i % 3 else f"note {i} é" for i in range(40)],
    "score": pa.array([i % 5 - 2 for i in range(40)], pa.int8()),
}), compression="zstd", row_group_size=16)


@settings(max_examples=300, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255)),
                      min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.integers(0, len(SAMPLE))))
# Found by this test in a full run: a column chunk's type in the footer made
# BOOLEAN in an INT32 column (the offset is of SAMPLE as pyarrow 26 writes it).
# ``ParquetFile.read`` took it, ``pq.read_table`` refuses it; of 20,000 random
# damages like these the old reader differed from ``pq.read_table`` on 4.
@example(edits=[(2267, 0)], cut=None)
def test_a_damaged_file_reads_or_fails_as_read_table_does(edits, cut):
    raw = bytearray(SAMPLE)
    for where, value in edits:
        raw[where] = value
    _same(bytes(raw[:cut] if cut is not None else raw))


@pytest.mark.parametrize("names", [["x", "x"], ["__filename", "b"], ["__fragment_index", "b"],
                                   ["__batch_index", "b"], ["__last_in_fragment", "b"],
                                   ["__other", "b"], ["", "b"]])
def test_column_names_the_dataset_layer_refuses_stay_refused(names):
    table = pa.Table.from_arrays([pa.array([1, 2]), pa.array(["p", "q"])], names=names)
    _same(_parquet(table))


@pytest.mark.parametrize("table", [
    pa.table({"a": pa.array([], pa.int64())}),
    pa.table({"a": pa.array(["x", "y", "x"]).dictionary_encode()}),
    pa.table({"a": pa.nulls(3)}),
    pa.table({"a": [[1, 2], [3]], "s": [{"x": 1}, {"x": 2}]}),
    pa.table({"t": pa.array([1, 2], pa.timestamp("ns"))}),
    pa.table({"b": pa.array([b"\xff", b"a"])}),
])
def test_valid_files_read_as_read_table_reads_them(table):
    _same(_parquet(table))
    _same(_parquet(table, store_schema=False))


def _rewrite(folder, name: str, raw: bytes) -> None:
    """Replace a bundle's file and re-checksum it in the manifest (the other
    checksums left as they are), as a hostile editor would."""
    (folder / f"{name}.parquet").write_bytes(raw)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["tables"][name]["sha256"] = hashlib.sha256(raw).hexdigest()
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_a_column_path_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "b"
    write_bundle(tiny_snapshot(), folder)
    models = pq.read_table(folder / "models.parquet")
    raw = _parquet(models.append_column("zz\u00e9", pa.array([None] * models.num_rows,
                                                             pa.string())))
    # The column's name in the Parquet footer, its é made invalid UTF-8 (the
    # Arrow schema beside it is base64 and keeps the valid name).
    assert b"zz\xc3\xa9" in raw
    _rewrite(folder, "models", raw.replace(b"zz\xc3\xa9", b"zz\xc3\x28"))
    with pytest.raises(InputError, match=r"models\.parquet.*not a readable Parquet file"):
        read_bundle(folder)


def test_a_column_named_as_the_dataset_layer_names_its_own_is_still_refused(tmp_path):
    folder = tmp_path / "b"
    write_bundle(tiny_snapshot(), folder)
    models = pq.read_table(folder / "models.parquet")
    _rewrite(folder, "models", _parquet(models.append_column(
        "__filename", pa.array(["x"] * models.num_rows))))
    with pytest.raises(InputError, match=r"models\.parquet.*not a readable Parquet file:"
                                         r" Multiple matches"):
        read_bundle(folder)


def test_the_content_checksum_is_that_of_the_whole_ipc_stream():
    """Hashed as it is written, the checksum is still the SHA-256 of the Arrow
    IPC stream of the table in key order (what every manifest holds)."""
    ratings = tiny_snapshot()["ratings"]
    plain = ratings.select([c for c in ratings.column_names if not ratings.column(c).null_count])
    plain = plain.sort_by("rating_id")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, plain.schema) as writer:
        for batch in plain.combine_chunks().to_batches(1 << 20):
            writer.write_batch(batch)
    expected = hashlib.sha256(sink.getvalue()).hexdigest()
    assert content_sha256(plain, "rating_id") == expected
    assert content_sha256(plain.take(pa.array(range(plain.num_rows - 1, -1, -1))),
                          "rating_id") == expected
