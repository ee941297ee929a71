"""The audit command's allocator settings (clinieval._alloc) on glibc."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")

# A block allocated, freed and allocated again, as an audit does with its
# temporaries: prints the page faults of the second allocation. 1 MB is above
# glibc's starting mmap threshold of 128 kB and below the 4 MB from which
# numpy asks for huge pages; 64 MB is above the largest threshold glibc
# adjusts to (32 MB), the size of the audit's per-rating temporaries at 100x.
_WORKLOAD = """
import resource, sys
import numpy as np
from clinieval._alloc import steady_state_allocator
print(steady_state_allocator() if sys.argv[1] == "set" else None)
size = int(sys.argv[2])
block = np.ones(size // 8)
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = np.ones(size // 8)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(mode: str, size: int = 2**20, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _WORKLOAD, mode, str(size)],
                          capture_output=True, text=True, check=True, env={**clean, **env})
    answer, faults = done.stdout.split()
    return answer, int(faults)


def test_the_steady_state_thresholds_save_the_page_faults_of_fresh_large_blocks():
    answer, tuned = _run("set")
    assert answer == "True"
    _, default = _run("default")
    # glibc's default maps the first block afresh and frees it back to the
    # system, so the second is paged in again (256 pages); from the steady
    # state it reuses the first one's pages.
    assert tuned < 32 < 128 < default, (tuned, default)


def test_blocks_above_every_mmap_threshold_are_reused_too():
    # glibc maps a 64 MB block afresh at any mmap threshold (16,384 pages, or
    # a few dozen huge pages where numpy gets them); with mmap off and no
    # trimming the second block takes the first one's pages.
    _, tuned = _run("set", 2**26)
    _, default = _run("default", 2**26)
    assert tuned < 8 < 16 < default, (tuned, default)


@pytest.mark.parametrize("setting", [{"MALLOC_TRIM_THRESHOLD_": "131072"},
                                     {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}])
def test_a_users_own_malloc_setting_is_left_alone(setting):
    answer, _ = _run("set", **setting)
    assert answer == "False"
