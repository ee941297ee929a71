"""Fuzzing the inspect_ai log reader the way tests/io/test_fuzz_import.py fuzzes
the other formats: a log inspect_ai wrote (tests/io/inspect_task.py), mutated
(types, ranges, encodings, nesting, sizes, structure; for ``.eval`` archives
one member's JSON and sometimes the archive's bytes), then imported into a
database that already holds a snapshot. The property: the only exception is
an :class:`InputError` naming the file, and a refused log leaves the
database as it was."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.io.importer import import_snapshot
from tests.io.test_fuzz_import import (
    EXAMPLES,
    OUTCOMES,
    SLOW_FACTOR,
    attempt,
    baseline,
    dumps,
    mutate,
    mutate_bytes,
    report,  # noqa: F401  (prints the outcome counts at the end of the module)
    write_foreign,
)

pytest.importorskip("inspect_ai")
from tests.io import inspect_task  # noqa: E402  (needs inspect_ai)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return inspect_task.write_logs(tmp_path_factory.mktemp("inspect-logs"))


def _mutated_archive(draw, original: bytes) -> bytes:
    """The archive with one member's JSON mutated (or dropped), sometimes damaged."""
    with zipfile.ZipFile(io.BytesIO(original)) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    name = draw(st.sampled_from(sorted(members)))
    if draw(st.integers(0, 9)) == 0:
        del members[name]
    else:
        members[name] = mutate_bytes(draw, dumps(mutate(draw, json.loads(members[name])), draw))
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    data = sink.getvalue()
    return mutate_bytes(draw, data) if draw(st.integers(0, 4)) == 0 else data


@pytest.mark.parametrize("scale", [1, pytest.param(SLOW_FACTOR, marks=pytest.mark.slow)],
                         ids=["default", "slow"])
@pytest.mark.parametrize("fmt", ["json", "eval"])
def test_a_mutated_inspect_log_is_refused_cleanly_or_imported(engine, logs, request,
                                                              tmp_path_factory, fmt, scale):
    if scale > 1 and "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("the large fuzz run: pytest -m slow tests/io/test_fuzz_inspect.py")
    backend = engine.dialect.name
    import_snapshot(engine, baseline())
    original = logs[fmt].read_bytes()
    doc = json.loads(original) if fmt == "json" else None

    @settings(max_examples=EXAMPLES[backend] * scale, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data):
        work = tmp_path_factory.mktemp("fuzz-inspect")
        if fmt == "json":
            path = write_foreign(work / "log.json", mutate(data.draw, doc), data.draw)
        else:
            path = work / "log.eval"
            path.write_bytes(_mutated_archive(data.draw, original))
        attempt(engine, path, data.draw(st.sampled_from(["auto", "inspect"])),
                f"{backend}/inspect-{fmt}")

    run()
    assert OUTCOMES[f"{backend}/inspect-{fmt}", "refused"] > 0
