"""Reading the snapshot in a forked process while the audit's modules import.

The audit command spends its first second importing scipy, the sections, the
report and matplotlib, none of which reading a snapshot needs; on two cores a
child forked before those imports reads meanwhile (a SQLite read is most of a
second at paper scale, and a bundle's read holds it to the import's contract:
checksums, row counts, the validator). The child hands back the :class:`AuditData` as a
pickle whose arrays travel out of band (protocol 5), each read from the pipe
straight into the parent's buffer, so the parent never holds them twice.

Whatever goes wrong in the child, the parent reads the snapshot itself: an
error then surfaces from the same code, with the same message, as without
reading ahead.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from typing import BinaryIO

# numpy and pyarrow are imported before the fork, so that the child shares
# them rather than importing them again; neither has started a thread pool by
# then (only jemalloc's background thread, which survives a fork). So is
# pandas, which starts no thread either: the audit needs it, and the child
# would import it too, since pyarrow imports pandas (to tell whether a value
# is a pandas object) at its first pa.scalar or pa.array of Python values.
import pandas  # noqa: F401

from clinieval.audit.data import AuditData, audit_data

_COUNT = struct.Struct("<Q")


class ReadAhead:
    """A child process reading a snapshot; :meth:`result` waits for its data."""

    def __init__(self, pid: int, pipe: BinaryIO) -> None:
        self.pid, self.pipe = pid, pipe

    def result(self) -> AuditData | None:
        """The child's data, or None when it failed (read it yourself then)."""
        try:
            data = _receive(self.pipe)
        except (EOFError, OSError, pickle.UnpicklingError):
            data = None
        ok = self._reap(signal.SIGKILL if data is None else None) == 0
        return data if ok else None

    def cancel(self) -> None:
        """Stop the child if it still runs (the caller gave up waiting)."""
        if self.pid:
            self._reap(signal.SIGKILL)

    def _reap(self, kill: int | None) -> int:
        self.pipe.close()
        if kill is not None:
            try:
                os.kill(self.pid, kill)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return os.waitstatus_to_exitcode(status)


def read_ahead(source: str) -> ReadAhead | None:
    """Start reading ``source`` (what :func:`audit_data` takes) in a forked child.

    None where that cannot help: without ``fork``, and once the audit's
    modules are imported (in a library caller or a test run), since the read
    would overlap with nothing. That also keeps the fork out of processes
    that have run Arrow's or OpenBLAS's thread pools (a fork copies only the
    calling thread).
    """
    if not hasattr(os, "fork") or "clinieval.audit.run" in sys.modules:
        return None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        code = 1
        try:
            with os.fdopen(write_end, "wb") as pipe:
                _send(pipe, audit_data(source))
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return ReadAhead(pid, os.fdopen(read_end, "rb"))


def _send(pipe: BinaryIO, data: AuditData) -> None:
    """The pickle's length and the buffers' lengths, the pickle, the buffers."""
    buffers: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(data, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    sizes = [len(payload), len(raws), *(r.nbytes for r in raws)]
    pipe.write(b"".join(_COUNT.pack(n) for n in sizes))
    pipe.write(payload)
    for raw in raws:
        pipe.write(raw)
    pipe.flush()


def _receive(pipe: BinaryIO) -> AuditData:
    size, count = _read_counts(pipe, 2)
    sizes = _read_counts(pipe, count)
    payload = _read_exactly(pipe, bytearray(size))
    buffers = [_read_exactly(pipe, bytearray(n)) for n in sizes]
    data = pickle.loads(payload, buffers=buffers)
    if not isinstance(data, AuditData):
        raise pickle.UnpicklingError("the reading process sent no audit data")
    return data


def _read_counts(pipe: BinaryIO, count: int) -> list[int]:
    raw = _read_exactly(pipe, bytearray(_COUNT.size * count))
    return [n for (n,) in _COUNT.iter_unpack(raw)]


def _read_exactly(pipe: BinaryIO, buffer: bytearray) -> bytearray:
    view, filled = memoryview(buffer), 0
    while filled < len(buffer):
        n = pipe.readinto(view[filled:])
        if not n:
            raise EOFError("the reading process stopped early")
        filled += n
    return buffer
