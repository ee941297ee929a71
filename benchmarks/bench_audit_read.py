"""What holding a bundle to the import's contract costs the audit's read, in
one run on the same paper-scale bundle.

Unvalidated: the bundle's tables read as they are (no file or content
checksums, no validator), then coded for the audit. Validated: what
``clinieval audit`` does (:func:`clinieval.audit.data.audit_data`): every
file's SHA-256, row counts, types, every table's content checksum, the
snapshot checksum and the import's validator, then the same coding. Each read
runs in a fresh process that has imported what the audit command imports
before it forks its reading child (numpy, pyarrow, pandas, the audit's data
module), so it starts as cold as that child does. The two alternate, and
each prints wall and CPU time with the load average: on a shared machine
the CPU times and the ratio mean more than the wall times.

    python benchmarks/bench_audit_read.py [--repeat 3] [--scale 1.0] [--bundle DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_READ = """
import json, sys, time
from pathlib import Path
import numpy, pyarrow, pandas  # what the audit command imports before it forks
from clinieval.audit.data import audit_data, from_snapshot
from clinieval.io.bundle import read_bundle, read_manifest

folder, validated = Path(sys.argv[1]), sys.argv[2] == "validated"
wall, cpu = time.perf_counter(), time.process_time()
if validated:
    data = audit_data(folder)
else:
    data = from_snapshot(read_bundle(folder, verify=False),
                         read_manifest(folder)["snapshot_sha256"])
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "ratings": len(data.rating_score), "checksum": data.checksum}))
"""


def read_once(bundle: Path, kind: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _READ, str(bundle), kind], check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--bundle", type=Path, help="an existing bundle instead of a synthetic one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = args.bundle
        if bundle is None:
            from clinieval.io.bundle import write_bundle
            from clinieval.synth import generate

            bundle = Path(tmp) / "paper"
            write_bundle(generate(seed=0, scale=args.scale), bundle)
        read_once(bundle, "validated")  # the files into the page cache, the bytecode compiled
        spent: dict[str, list[dict]] = {"unvalidated": [], "validated": []}
        for _ in range(args.repeat):
            for kind in spent:
                load = os.getloadavg()[0]
                found = read_once(bundle, kind)
                spent[kind].append(found)
                print(f"{kind:>11} read: {found['wall']:6.2f} s wall, {found['cpu']:6.2f} s CPU"
                      f" ({found['ratings']:,} ratings; load average before {load:.1f})")
        same = {r["checksum"] for runs in spent.values() for r in runs}
        assert len(same) == 1, "the two reads name different snapshots"
        median = {kind: {m: statistics.median(r[m] for r in runs) for m in ("wall", "cpu")}
                  for kind, runs in spent.items()}
        for measure in ("cpu", "wall"):
            plain, checked = median["unvalidated"][measure], median["validated"][measure]
            print(f"median {measure}: validated {checked:.2f} s vs unvalidated {plain:.2f} s:"
                  f" {checked / plain:.2f}x, checks cost {checked - plain:+.2f} s")


if __name__ == "__main__":
    main()
