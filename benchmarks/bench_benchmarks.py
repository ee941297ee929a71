"""The Benchmarks and cost section at MedHELM scale, in one run: reading
per-instance scores column-wise (Arrow) against record by record, and the
section's summary (instance and benchmark resampling) at two B.

Data: 35 benchmarks x 9 models x 1,000 instances of exact-match scores in a
JSON Lines file (315,000 rows). Times are CPU (process time, all threads).

    python benchmarks/bench_benchmarks.py [--bootstrap 1000 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from clinieval.audit import AuditSettings
from clinieval.audit.context import Context
from clinieval.audit.run import audit_data
from clinieval.audit.sections import benchmarks as section
from clinieval.io.foreign import benchmark_scores as reader
from clinieval.synth import generate

N_BENCH, N_MODELS, N_INSTANCES = 35, 9, 1000


def write_scores(path: Path, rng: np.random.Generator) -> None:
    with path.open("w") as handle:
        for k in range(N_BENCH):
            for m in range(N_MODELS):
                hits = rng.random(N_INSTANCES) < 0.4 + 0.04 * m
                for i, hit in enumerate(hits):
                    handle.write(json.dumps({"model": f"m{m}", "benchmark": f"b{k}",
                                             "instance_id": i, "score": int(hit)}) + "\n")


def cpu(func):
    start = time.process_time()
    out = func()
    return out, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", type=int, nargs="+", default=[1000, 10_000])
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.jsonl"
        write_scores(path, np.random.default_rng(1))
        fast, t_fast = cpu(lambda: reader.read_benchmark_scores(path))
        slow, t_slow = cpu(lambda: pa.Table.from_pylist(
            [r for _, _, r in reader._read_file(path, None, None, None)], schema=reader.COLUMNS))
        assert fast.equals(slow)
        data = audit_data(generate(0, 0.02))
        timings = []
        for B in args.bootstrap:
            ctx = Context(data, AuditSettings(bootstrap=B, benchmark_scores=str(path)))
            timings.append((B, cpu(lambda ctx=ctx: section.compute(ctx))[1]))
    print(f"{N_BENCH} benchmarks x {N_MODELS} models x {N_INSTANCES} instances"
          f" ({fast.num_rows:,} rows); load average at start {load:.2f}; CPU time")
    print(f"read, column-wise (Arrow):  {t_fast:7.2f} s")
    print(f"read, record by record:     {t_slow:7.2f} s   ratio {t_slow / t_fast:5.1f}x")
    for B, seconds in timings:
        print(f"section (read + summary), B = {B:>6,}: {seconds:7.2f} s")


if __name__ == "__main__":
    main()
