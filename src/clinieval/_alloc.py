"""Allocator settings for a batch command that makes many large arrays.

glibc's malloc serves blocks above a threshold (128 kB at start, at most
32 MB) from fresh ``mmap`` pages and gives them back on free, so every large
temporary is paged in again: the kernel zeroes each page on its first touch,
and that zeroing, not the count of faults (numpy asks for huge pages), is
what costs. At 100x paper scale the audit makes hundreds of temporaries of
hundreds of MB (one or a few per rating), and handing each to the system and
back took about a third of the whole command's CPU time, all of it system
time (``benchmarks/bench_audit.py --scale-100`` measures it).

So the command keeps freed memory for reuse instead: no block comes from
``mmap`` (``M_MMAP_MAX`` 0: large blocks come from the heap, where freed
space is reused) and the heap is never trimmed while the process runs
(``M_TRIM_THRESHOLD`` -1), and the 100x command's system time falls to a
small fraction of what it was.
The cost is that freed memory is not returned until the process exits, and
the heap can hold gaps between live blocks, so the peak RSS rises a little
(the audit's largest working set is reached anyway). A process that wants
memory back between computations should not call this.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
MMAP_MAX = 0  # no block from mmap: every large block from the heap, reused once freed
TRIM_THRESHOLD = -1  # mallopt(3): -1 disables trimming (the heap keeps its free top)


def steady_state_allocator() -> bool:
    """Set the thresholds on glibc (Linux); elsewhere, or when the user tuned
    glibc's malloc (a ``MALLOC_*_`` variable or ``glibc.malloc`` in
    ``GLIBC_TUNABLES``), change nothing. Returns whether the thresholds were
    set."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "") or any(
            name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        return all(libc.mallopt(param, value) for param, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_MMAP_MAX, MMAP_MAX),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD)))
    except (OSError, AttributeError):
        return False
