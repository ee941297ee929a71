"""The audit's computation against the straightforward method, on the same
paper-scale synthetic snapshot, in one run.

Straightforward: a choix fit (``ilsr_pairwise``, its fastest pairwise fitter)
for each bootstrap resample of the vote list, and rubric-mean bootstraps
that resample individual ratings per model x criterion with pandas.
Ours: the whole audit computation (all twelve sections, every bootstrap).

    python benchmarks/bench_audit.py [--bootstrap 1000] [--baseline-b 1000]
        [--command] [--scale-100]

``--baseline-b`` below the bootstrap count times that many straightforward
resamples and scales the time linearly to B (printed as such).
``--command`` also times the whole ``clinieval audit`` command (a fresh
process: imports, reading, computation, report and figures) on the paper-scale
snapshot read from its bundle and from SQLite, ``--repeat`` times each;
``--scale-100`` times it on the 100x snapshot with peak memory. Every timing
is printed as wall time and CPU time (CPU of the command includes its figure
worker processes); the machine's load average is printed beside the command
timings: wall times mean little on a busy machine, CPU times less so.
"""

from __future__ import annotations

import os

# Both methods run with one BLAS thread, as the command does (see cli.py):
# their matrix products are small and threads only add spinning CPU.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import compileall
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import choix
import numpy as np
import pandas as pd

from clinieval._alloc import steady_state_allocator
from clinieval.audit import audit
from clinieval.audit.data import AuditData, from_bundle
from clinieval.io.bundle import write_bundle
from clinieval.synth import generate


def straightforward(data: AuditData, B: int, baseline_b: int, seed: int
                    ) -> tuple[float, float]:
    """Seconds (wall, CPU) of the straightforward method, scaled to ``B``."""
    rng = np.random.default_rng(seed)
    start_cpu = time.process_time()
    a, b = data.answer_model[data.pref_a], data.answer_model[data.pref_b]
    votes = np.column_stack([a, b, data.pref_outcome])
    votes = votes[votes[:, 0] != votes[:, 1]]
    start = time.perf_counter()
    for _ in range(baseline_b):
        sample = votes[rng.integers(0, len(votes), len(votes))]
        pairs = [(x, y) if o == 0 else (y, x) for x, y, o in sample if o <= 1]
        choix.ilsr_pairwise(data.n_models, pairs, alpha=1e-6)
    bt_seconds = (time.perf_counter() - start) * B / baseline_b
    frame = pd.DataFrame({"model": data.rating_model(), "criterion": data.rating_criterion,
                          "score": data.rating_score})
    start = time.perf_counter()
    groups = [g for _, g in frame.groupby(["model", "criterion"])["score"]]
    for _ in range(baseline_b):
        for group in groups:
            group.sample(frac=1.0, replace=True, random_state=rng).mean()
    mean_seconds = (time.perf_counter() - start) * B / baseline_b
    cpu = (time.process_time() - start_cpu) * B / baseline_b
    scaled = "" if baseline_b == B else f" (measured on {baseline_b}, scaled to {B})"
    print(f"straightforward BT bootstrap (choix x {B}){scaled}: {bt_seconds:8.1f} s")
    print(f"straightforward rubric-mean bootstrap (pandas){scaled}: {mean_seconds:8.1f} s")
    print(f"straightforward total: {bt_seconds + mean_seconds:8.1f} s wall, {cpu:8.1f} s CPU")
    return bt_seconds + mean_seconds, cpu


def ours(data: AuditData, B: int, seed: int) -> tuple[float, float]:
    """Seconds (wall, CPU) of the whole audit computation, best of two runs."""
    wall, cpu = [], []
    for _ in range(2):
        start, start_cpu = time.perf_counter(), time.process_time()
        audit(data, bootstrap=B, seed=seed)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(f"clinieval audit computation (all sections, B = {B}): {min(wall):8.2f} s wall,"
          f" {min(cpu):8.2f} s CPU (best of two)")
    return min(wall), min(cpu)


def designs(data: AuditData, B: int, seed: int) -> None:
    """The computation with the default two-way design next to the old
    rating-level default (``--cluster none``): best of two runs each, wall
    time and this process's CPU time (steadier on a shared machine)."""
    wall, cpu = {}, {}
    for cluster in ("none", "twoway", "none", "twoway"):
        start, start_cpu = time.perf_counter(), time.process_time()
        audit(data, bootstrap=B, seed=seed, cluster=cluster)
        wall.setdefault(cluster, []).append(time.perf_counter() - start)
        cpu.setdefault(cluster, []).append(time.process_time() - start_cpu)
    for name, spent in (("wall", wall), ("CPU", cpu)):
        old, new = min(spent["none"]), min(spent["twoway"])
        print(f"audit computation ({name}), --cluster none (old default): {old:6.2f} s;"
              f" --cluster twoway (default): {new:6.2f} s; twoway / none: {new / old:.2f}x")


_MEASURED = """
import resource, sys
from clinieval.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def command(source: str, label: str, out: Path, B: int) -> None:
    """Time the whole command in a fresh process (wall, and CPU of it and its
    figure workers) and read that process's own peak RSS."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _MEASURED, "audit", source, "--out",
                           str(out), "--bootstrap", str(B)], check=True, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = int(done.stderr.strip().splitlines()[-1]) / 1024**2
    print(f"`clinieval audit` from {label} (report rendered): {seconds:8.1f} s wall,"
          f" {cpu:.1f} s CPU, peak RSS {peak:.2f} GB (load average before: {load:.1f})")


def bytecode() -> None:
    """Compile the package once, as its first run does unless bytecode writing
    is off (PYTHONDONTWRITEBYTECODE): otherwise every timed run would compile
    it from source again."""
    import clinieval

    compileall.compile_dir(Path(clinieval.__file__).parent, quiet=1)
    if sys.flags.dont_write_bytecode:
        print("bytecode writing is off here; clinieval was compiled once before timing")


def sqlite_copy(bundle: Path, database: Path) -> str:
    """The bundle imported into a fresh SQLite file; returns its URL."""
    url = f"sqlite:///{database}"
    subprocess.run([sys.executable, "-m", "clinieval.cli", "import", str(bundle),
                    "--database-url", url], check=True, capture_output=True)
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--baseline-b", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--command", action="store_true")
    parser.add_argument("--scale-100", action="store_true")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    steady_state_allocator()  # the allocator thresholds the command sets (for both methods)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "paper"
        write_bundle(generate(seed=0, scale=1.0), bundle)
        data = from_bundle(bundle)
        print(f"paper-scale snapshot: {len(data.rating_score):,} ratings,"
              f" {len(data.pref_a):,} votes, {data.n_models} models")
        fast = ours(data, args.bootstrap, args.seed)
        designs(data, args.bootstrap, args.seed)
        slow = straightforward(data, args.bootstrap, args.baseline_b, args.seed)
        print(f"ratio (straightforward / clinieval): {slow[0] / fast[0]:,.0f}x wall,"
              f" {slow[1] / fast[1]:,.0f}x CPU")
        if args.command or args.scale_100:
            bytecode()
        if args.command:
            url = sqlite_copy(bundle, Path(tmp) / "paper.db")
            for _ in range(args.repeat):
                command(str(bundle), "a bundle", Path(tmp) / "report", args.bootstrap)
                command(url, "SQLite", Path(tmp) / "report-db", args.bootstrap)
        if args.scale_100:
            big = Path(tmp) / "scale100"
            subprocess.run([sys.executable, "-m", "clinieval.cli", "synth", "--out", str(big),
                            "--scale", "100"], check=True, capture_output=True)
            command(str(big), "the 100x bundle", Path(tmp) / "report100", args.bootstrap)


if __name__ == "__main__":
    main()
