"""Small helpers shared by tests (file writers, id renaming)."""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime
from pathlib import Path

from clinieval.testing import tiny_tables

ID_FIELDS = ("case_id", "model_id", "answer_id", "rater_id", "answer_a_id", "answer_b_id")


def renamed_tiny_tables(prefix: str, offset: int) -> dict[str, list[dict]]:
    """The tiny fixture with every id prefixed, so it can be appended to it."""
    rows = tiny_tables()
    for name, data in rows.items():
        if name == "criteria":
            continue
        for row in data:
            for field in ID_FIELDS:
                if row.get(field) is not None:
                    row[field] = prefix + row[field]
            for field in ("rating_id", "preference_id"):
                if field in row:
                    row[field] += offset
    return rows


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def write_csv(path: Path, rows: list[dict]) -> Path:
    names = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        writer.writerows({k: _text(v) for k, v in row.items()} for row in rows)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, default=_text) + "\n" for row in rows), "utf-8")
    return path


def write_tables(folder: Path, rows: dict[str, list[dict]], fmt: str = "csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    writer = write_csv if fmt == "csv" else write_jsonl
    for name, data in rows.items():
        if name != "criteria":
            writer(folder / f"{name}.{fmt}", data)
    return folder


def zipped_bundle(snapshot, tmp_path: Path, name: str = "bundle") -> bytes:
    """``snapshot`` written as a bundle folder ``name`` under ``tmp_path`` and
    zipped with that folder at the top, as an admin would upload it."""
    import io
    import zipfile

    from clinieval.io.bundle import write_bundle

    folder = tmp_path / name
    write_bundle(snapshot, folder, overwrite=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in folder.rglob("*"):
            zf.write(path, path.relative_to(tmp_path).as_posix())
    return buffer.getvalue()


def local_model():
    """llama-server and SmolLM2 as `.ci/setup-llm.sh` installs them (in
    $CLINIEVAL_LLM_VENV, then the checkout's .venv-llm, then this
    interpreter). Skips when they are not installed; fails instead with
    CLINIEVAL_REQUIRE_LLM=1 (CI), where a skip would hide a broken set-up."""
    import pytest

    from clinieval.providers.llamacpp import find_local_model

    venvs = [Path(os.environ["CLINIEVAL_LLM_VENV"])] if os.environ.get("CLINIEVAL_LLM_VENV") else []
    model = find_local_model([*venvs, Path(__file__).parents[1] / ".venv-llm"])
    if model is None:
        reason = "llama-server and SmolLM2 are not installed: run .ci/setup-llm.sh"
        if os.environ.get("CLINIEVAL_REQUIRE_LLM") == "1":
            pytest.fail(f"CLINIEVAL_REQUIRE_LLM=1 but {reason}")
        pytest.skip(reason)
    return model


def with_judgments(snap, frame):
    """``snap`` with its judgments replaced by the rows of ``frame`` (new
    judgment ids, the snapshot's judgments schema)."""
    import numpy as np
    import pyarrow as pa

    from clinieval.snapshot import Snapshot

    tables = dict(snap.tables)
    frame = frame.reset_index(drop=True).assign(judgment_id=np.arange(1, len(frame) + 1))
    tables["judgments"] = pa.Table.from_pandas(frame, schema=snap["judgments"].schema,
                                               preserve_index=False)
    return Snapshot.from_tables(tables, snap.meta)
