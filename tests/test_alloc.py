"""The audit command's allocator settings (clinieval._alloc) on glibc."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")

# A 1 MB block (above glibc's starting mmap threshold of 128 kB, below the
# 4 MB from which numpy asks for huge pages) allocated, freed and allocated
# again, as an audit does with its temporaries: prints the page faults of the
# second allocation.
_WORKLOAD = """
import resource, sys
import numpy as np
from clinieval._alloc import steady_state_allocator
print(steady_state_allocator() if sys.argv[1] == "set" else None)
block = np.ones(2**20 // 8)
del block
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = np.ones(2**20 // 8)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _WORKLOAD, mode], capture_output=True,
                          text=True, check=True, env={**clean, **env})
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


@pytest.mark.parametrize("setting", [{"MALLOC_TRIM_THRESHOLD_": "131072"},
                                     {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}])
def test_a_users_own_malloc_setting_is_left_alone(setting):
    answer, _ = _run("set", **setting)
    assert answer == "False"
