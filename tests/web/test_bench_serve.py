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

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_serve.py"


def test_bench_serve_runs_and_finds_nothing_lost():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--scale", "0.1", "--clinicians", "8", "--seconds", "2",
         "--warmup", "1", "--postgres", ""],
        capture_output=True, text=True, timeout=300, check=True).stdout
    rate = re.search(r"sqlite: ([\d,]+) acknowledged submissions in [\d.]+ s = (\d+) submissions/s"
                     r" with 8 clinicians after a 1 s warm-up", out)
    assert rate and int(rate[1].replace(",", "")) > 0, out
    assert re.search(r"sqlite: next task \(from the task list\) p50 \d+ ms", out), out
    checked = ast.literal_eval(re.search(r"sqlite: (\{'acknowledged'.*?\})", out)[1])
    # The check covers the warm-up's submissions too: more than were measured,
    # unless a loaded machine had none acknowledged within the warm-up.
    assert checked["acknowledged"] >= int(rate[1].replace(",", "")), out
    assert checked["lost"] == checked["duplicated"] == checked["over_assigned"] == 0, out


def test_simulated_clinicians_follow_the_studys_specialties():
    """Seats in proportion to the cases, by largest remainders (worked by hand:
    quotas 2.0, 1.2 and 0.8 of 4 give a, a, b and, for the last seat, c)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_serve", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cases = ["a"] * 5 + ["b"] * 3 + ["c"] * 2
    assert bench._specialties_of(cases, 4) == ["a", "a", "b", "c"]
    assert bench._specialties_of(cases, 10) == ["a"] * 5 + ["b"] * 3 + ["c"] * 2
    assert len(bench._specialties_of(cases * 7 + ["d"], 200)) == 200
