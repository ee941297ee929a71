"""The platform benchmark runs end to end on a small study (SQLite): a real
server, simulated clinicians over loopback, the warm-up, and the check of
every acknowledged submission against the database. Its figures are the
benchmark's business; this only keeps the script working."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parent.parent / "benchmarks" / "bench_serve.py"


def test_bench_serve_runs_and_finds_nothing_lost():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--scale", "0.1", "--clinicians", "8", "--seconds", "2",
         "--warmup", "0.5", "--postgres", ""],
        capture_output=True, text=True, timeout=300, check=True).stdout
    rate = re.search(r"sqlite: ([\d,]+) acknowledged submissions in [\d.]+ s = (\d+) submissions/s"
                     r" with 8 clinicians after a 0.5 s warm-up", out)
    assert rate and int(rate[1].replace(",", "")) > 0, out
    assert re.search(r"sqlite: next task \(from the task list\) p50 \d+ ms", out), out
    checked = ast.literal_eval(re.search(r"sqlite: (\{'acknowledged'.*?\})", out)[1])
    assert checked["acknowledged"] > int(rate[1].replace(",", "")), out  # the warm-up's too
    assert checked["lost"] == checked["duplicated"] == checked["over_assigned"] == 0, out
