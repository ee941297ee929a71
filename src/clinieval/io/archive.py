"""Zip archives as sources: a zipped bundle, a zipped tables folder, or the
platform's export (a bundle folder with the study's audit log beside it).

The archive is extracted into a temporary folder that is removed afterwards;
``ZipFile.extract`` drops absolute and parent parts of member names, so
nothing lands outside that folder. Limits on the unpacked size and the number
of members guard the server, which reads uploads; a file given on the command
line (an export from a collaborator, say) must fit in the free space where it
is unpacked, so a forged or bomb archive is refused before it fills the disk
(the sizes its directory declares bound what extraction writes).
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from clinieval.errors import InputError
from clinieval.io import bundle


def is_zip(path: Path) -> bool:
    return path.suffix.lower() == ".zip" and path.is_file()


@contextmanager
def opened(archive: Path, *, max_bytes: int | None = None, max_members: int | None = None,
           shown: str | None = None) -> Iterator[tuple[Path, Path]]:
    """The temporary folder ``archive`` is extracted into and the folder in it
    to read; an InputError raised inside names ``shown`` (default: the
    archive's path) instead of the temporary copy."""
    shown = str(archive) if shown is None else shown
    folder = Path(tempfile.mkdtemp(prefix="clinieval-zip-"))
    try:
        try:
            yield folder, unpack(archive, folder, max_bytes=max_bytes,
                                 max_members=max_members, shown=shown)
        except InputError as err:
            raise naming(err, folder, shown) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def unpack(archive: Path, into: Path, *, max_bytes: int | None = None,
           max_members: int | None = None, shown: str | None = None) -> Path:
    """Extract ``archive`` into ``into`` and return the folder to read: a
    bundle at the top, else the one bundle folder at the top (an export has
    its audit log beside it), else a single top folder, else ``into``."""
    shown = archive.name if shown is None else shown
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            size = sum(m.file_size for m in members)
            if max_bytes is not None and size > max_bytes:
                raise InputError(shown, f"unpacks to more than {max_bytes // 2**20} MiB",
                                 field="source")
            free = shutil.disk_usage(into if into.exists() else into.parent).free
            if size > free:
                raise InputError(shown, f"unpacks to {_mib(size)}, more than the {_mib(free)}"
                                 f" free in the temporary folder ({tempfile.gettempdir()};"
                                 " TMPDIR sets it)", field="source")
            if max_members is not None and len(members) > max_members:
                raise InputError(shown, f"holds more than {max_members} files",
                                 field="source", got=len(members))
            for member in members:
                parts = PurePosixPath(member.filename.replace("\\", "/")).parts
                if not member.is_dir() and not [p for p in parts if p not in ("/", ".", "..")]:
                    # extract() would write it over the folder itself ('.', '..', '/').
                    raise InputError(shown, f"member {member.filename!r} names no file",
                                     field="source")
                zf.extract(member, into)
    # A damaged, encrypted or unsupported archive, or a member the file system
    # cannot hold (a name too long): each is the archive's fault, not ours.
    except (zipfile.BadZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError,
            OSError, ValueError) as err:
        raise InputError(shown, f"not a readable zip archive: {err}", field="source") from None
    if bundle.is_bundle(into):
        return into
    entries = sorted(into.iterdir()) if into.exists() else []
    folders = [e for e in entries if e.is_dir()]
    bundles = [f for f in folders if bundle.is_bundle(f)]
    if len(bundles) == 1:
        return bundles[0]
    return folders[0] if len(entries) == 1 and folders else into


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def naming(err: InputError, folder: Path, shown: str) -> InputError:
    """``err`` with paths inside ``folder`` written as ``shown`` (the archive,
    or the upload as it was sent): ``cases.zip/cases.csv``, not a temporary path."""
    for path in (folder, str(folder.resolve())):
        err.args = (str(err).replace(str(path), shown),)
        err.source = str(err.source).replace(str(path), shown)
    return err
