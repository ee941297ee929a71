"""The audit command's allocator settings (clinieval._alloc) on glibc."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")

# Large temporaries of varied sizes allocated and freed in turn, as an audit
# does; prints the page faults they cost.
_WORKLOAD = """
import resource, sys
import numpy as np
from clinieval._alloc import steady_state_allocator
print(steady_state_allocator() if sys.argv[1] == "set" else None)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in [3, 1, 6, 2, 5] * 4:
    block = np.ones(size * 2**20 // 8)
    del block
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
    # glibc's default maps the first large blocks afresh each time (about
    # 2,800 faults here); from the steady state they are paged in once.
    assert tuned < 0.75 * default, (tuned, default)


@pytest.mark.parametrize("setting", [{"MALLOC_TRIM_THRESHOLD_": "131072"},
                                     {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}])
def test_a_users_own_malloc_setting_is_left_alone(setting):
    answer, _ = _run("set", **setting)
    assert answer == "False"
