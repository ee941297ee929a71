"""Files an admin uploads (a study's source of cases and answers, a rubric),
read with the same readers, checks and messages as the command line; an
error names the file as it was sent, never our temporary copy of it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import InputError
from clinieval.io import archive
from clinieval.snapshot import Snapshot

MAX_UPLOAD = 50 * 1024 * 1024
MAX_RUBRIC = 2**20
MAX_MEMBERS = 10_000
"""Files in an uploaded zip (a source has a few tables, or a bundle's files)."""


@dataclass(frozen=True)
class Upload:
    """An uploaded file: its name (the importer reads the format from the
    suffix) and its bytes."""

    filename: str
    content: bytes


def _read_upload(upload: Upload, what: str):
    """Read an uploaded source with the same reader (and the same all-or-nothing
    checks and messages) as ``clinieval import``."""
    from clinieval.sources import read_source

    if len(upload.content) > MAX_UPLOAD:
        raise InputError(upload.filename, f"larger than {MAX_UPLOAD // 2**20} MiB", field=what)
    name = _file_name(upload.filename, "upload")
    folder = Path(tempfile.mkdtemp(prefix="clinieval-upload-"))
    try:
        path = folder / name
        path.write_bytes(upload.content)
        if name.lower().endswith(".zip"):
            path = archive.unpack(path, folder / "unzipped", max_bytes=4 * MAX_UPLOAD,
                                  max_members=MAX_MEMBERS)
        return read_source(path)[0]
    except InputError as err:
        raise _as_sent(err, folder, upload.filename) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _file_name(sent: str | None, default: str) -> str:
    """The uploaded file's name as a name inside our temporary folder: its last
    part, without NUL, at most 100 characters (keeping the suffix the
    reader goes by); ``default`` (and the suffix) when nothing usable is left."""
    name = Path((sent or "").replace("\x00", "")).name
    suffix = "".join(Path(name).suffixes)[-16:]
    if name in ("", ".", "..") or len(name.encode()) > 100:
        name = default + (suffix if len(suffix.encode()) <= 16 else "")
    return name


def _as_sent(err: InputError, folder: Path, sent: str | None) -> InputError:
    """``err`` naming the upload as sent instead of our temporary copy of it."""
    for path in (folder / "unzipped", *sorted(folder.iterdir(), reverse=True), folder):
        archive.naming(err, path, sent or "upload")
    return err


def read_rubric(upload: Upload | None):
    from clinieval.rubric import load_rubric

    if upload is None or not upload.content:
        return load_rubric()
    if len(upload.content) > MAX_RUBRIC:
        raise InputError(upload.filename, f"larger than {MAX_RUBRIC // 2**20} MiB",
                         field="rubric")
    folder = Path(tempfile.mkdtemp(prefix="clinieval-rubric-"))
    try:
        path = folder / _file_name(upload.filename, "rubric")
        path.write_bytes(upload.content)
        return load_rubric(path)
    except InputError as err:
        raise _as_sent(err, folder, upload.filename) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_upload(source: Upload) -> Snapshot:
    """An uploaded source of cases and answers, parsed and checked as
    ``clinieval import`` does (no database involved)."""
    return _read_upload(source, "source")
