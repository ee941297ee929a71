"""Allocator settings for a batch command that makes many large arrays.

glibc's malloc serves blocks above a threshold (128 kB at start) from fresh
``mmap`` pages and gives them back on free, so every large temporary is
paged in again, one zeroed page fault per 4 kB. It raises that threshold
itself, up to 32 MB, each time such a block is freed, so a process pays the
faults mostly in its first large computation: the audit's first run in a
process pays about twice the page faults of its second and none are left by
its third. Starting at the threshold glibc would reach anyway (32 MB, and
the trim threshold it pairs with it, twice that) moves the process to its
steady state from the start; blocks above 32 MB still come from ``mmap``
and go back to the system when freed, so peak memory at 100x scale is as
before.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

_M_TRIM_THRESHOLD = -1  # mallopt parameter numbers from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # the pair glibc's own adjustment keeps


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
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False
