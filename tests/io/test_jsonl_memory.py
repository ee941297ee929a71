"""A large JSON Lines table is parsed a slice of lines at a time into Arrow
columns, so reading it costs a small multiple of the file, not the 7-9x of
every line held as Python objects at once (issue 29: a JSONL of 10^6
identical lines was refused only after parsing it all at 2.6-5.3 GB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

READ = """
import resource, sys
from clinieval.errors import InputError
from clinieval.sources import read_source
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_source(sys.argv[1])
except InputError as err:
    print("refused:", err, file=sys.stderr)
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

LINES = 300_000


def test_a_large_jsonl_of_identical_lines_is_read_within_a_small_multiple_of_its_size(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    line = json.dumps({"answer_id": "a-1", "rater_id": "r-1", "criterion_id": "accuracy",
                       "score": 1, "comment": "the same line again " * 4,
                       "created_at": "2025-01-01T00:00:00Z"})
    path = folder / "ratings.jsonl"
    path.write_text((line + "\n") * LINES, "utf-8")
    src = Path(__file__).parents[2] / "src"
    done = subprocess.run([sys.executable, "-c", READ, str(folder)], capture_output=True,
                          text=True, env={"PYTHONPATH": str(src)}, timeout=600, check=True)
    before, peak = (int(n) for n in done.stdout.split())
    grown = (peak - before) * 1024  # ru_maxrss is in KiB on Linux
    assert grown < 4 * path.stat().st_size, (grown, path.stat().st_size)
