"""Judge-calibrated safety against the clinicians-only model summary, in one
run (issue 32 §4).

A synthetic snapshot (10x by default) keeps its clinician ratings on a
random 20% of the answers; two rubric judges score every answer on every
criterion (the answer's clinician mean on the full snapshot, plus noise of
SD 0.5 and 0.8, rounded and clipped): about 2.5 M judgments at 10x, as
issue 32 asks (``--judges 1`` for one). The section calibrates with the
first and licenses both. On one audit context the model summary (the
clinicians-only estimates) is timed, then the judgments' rows every judge
section shares (built once per audit), then the judge-calibrated section
with the same bootstrap. Two ratios are printed: the section with the
shared rows already built, and the section charged the whole rows build (as
if it were the audit's only judge section); with the load average (wall
times mean little on a busy machine, CPU times less so).

    python benchmarks/bench_calibrated.py [--scale 10] [--share 0.2] [--bootstrap 1000] [--judges 2]
        [--command]

``--command`` instead writes the judged snapshot as a bundle and times the
whole ``clinieval audit`` of it in a fresh process (every section, report
rendered) with that process's peak RSS (``--scale 100 --share 1 --command``:
the 100x snapshot with all its ratings plus the judges on every answer, the
memory bound of issue 32 §4); the sections are then not timed in this
process, which would hold a second copy of the data.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the audit command runs

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.run import build
from clinieval.audit.settings import AuditSettings
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.io.bundle import write_bundle
from clinieval.snapshot import Snapshot
from clinieval.synth import generate

JUDGES = (("bench-rubric-judge", 0.5), ("bench-rubric-judge-b", 0.8))  # (model, noise SD)


def judged_snapshot(scale: float, share: float, seed: int, judges: int = 2) -> Snapshot:
    """The snapshot with ratings on ``share`` of the answers and ``judges``
    rubric judges on all of them (built in arrow: at 100x, 25 M judgments)."""
    snap = generate(seed, scale)
    rng = np.random.default_rng([seed, 32])
    means = (snap["ratings"].group_by(["answer_id", "criterion_id"])
             .aggregate([("score", "mean")])
             .sort_by([("answer_id", "ascending"), ("criterion_id", "ascending")]))
    mean = means["score_mean"].to_numpy()
    schema = snap["judgments"].schema
    parts = []
    for model, noise in JUDGES[:judges]:
        score = np.clip(np.round(mean + noise * rng.standard_normal(mean.size)),
                        SCORE_MIN, SCORE_MAX)
        columns = {"answer_id": means["answer_id"], "criterion_id": means["criterion_id"],
                   "score": pa.array(score), "run_id": _constant("bench", mean.size),
                   "judge_model": _constant(model, mean.size),
                   "judge_kind": _constant("rubric", mean.size),
                   "parse_status": _constant("ok", mean.size),
                   "juror": pa.array(np.zeros(mean.size, dtype=np.int16)),
                   "repeat": pa.array(np.zeros(mean.size, dtype=np.int16)),
                   "created_at": pa.array(np.full(mean.size, np.datetime64("2025-09-01", "us")),
                                          pa.timestamp("us", tz="UTC"))}
        parts.append(pa.table({f.name: columns[f.name].cast(f.type) if f.name in columns
                               else pa.nulls(mean.size, f.type) for f in schema}))
    judged = pa.concat_tables(parts)
    judged = judged.set_column(0, schema.field(0),
                               pa.array(np.arange(1, judged.num_rows + 1), pa.int64()))
    answers = snap["answers"].column("answer_id").to_numpy()
    kept = rng.choice(answers, int(share * answers.size), replace=False)
    tables = dict(snap.tables)
    tables["judgments"] = judged
    tables["ratings"] = snap["ratings"].filter(pc.is_in(snap["ratings"]["answer_id"],
                                                        pa.array(kept)))
    return Snapshot.from_tables(tables, snap.meta)


def _constant(value: str, n: int) -> pa.Array:
    """``n`` copies of one string, built from a one-value dictionary (no
    Python object per row)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                          pa.array([value])).cast(pa.string())


def command_run(args) -> None:
    """The whole ``clinieval audit`` of the judged snapshot's bundle in a
    fresh process, timed with its peak RSS (bench_audit's measured run). A
    child process of its own writes the bundle, so this one holds no copy of
    the data while the audit runs."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_audit import bytecode, command

    bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "judged"
        subprocess.run([sys.executable, __file__, "--write-bundle", str(bundle),
                        "--scale", str(args.scale), "--share", str(args.share),
                        "--seed", str(args.seed), "--judges", str(args.judges)], check=True)
        command(str(bundle), f"the judged {args.scale:g}x bundle", Path(tmp) / "report",
                args.bootstrap)


def write_judged(args) -> None:
    snap = judged_snapshot(args.scale, args.share, args.seed, args.judges)
    print(f"scale {args.scale:g}: {snap['answers'].num_rows:,} answers,"
          f" {snap['ratings'].num_rows:,} ratings, {snap['judgments'].num_rows:,} judgments")
    write_bundle(snap, Path(args.write_bundle))


def timed(ctx: Context, key: str) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    build(ctx, [key])
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judges", type=int, default=2, choices=(1, 2))
    parser.add_argument("--command", action="store_true",
                        help="time `clinieval audit` of the snapshot's bundle, with peak RSS")
    parser.add_argument("--write-bundle", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_bundle:
        return write_judged(args)
    if args.command:
        return command_run(args)
    start = time.perf_counter()
    snap = judged_snapshot(args.scale, args.share, args.seed, args.judges)
    data = audit_data(snap)
    made = time.perf_counter() - start
    print(f"scale {args.scale:g}: {data.n_answers:,} answers, {data.rating_answer.size:,} ratings"
          f" on {np.unique(data.rating_answer).size:,} answers,"
          f" {snap['judgments'].num_rows:,} judgments (built in"
          f" {time.perf_counter() - start:.1f} s)")
    ctx = Context(data, AuditSettings(bootstrap=args.bootstrap, seed=args.seed))
    summary = timed(ctx, "model_summary")
    # The judgments' rows are built once per audit context and shared by every
    # judge section: timed here on their own, then the section with them built.
    rows = time.perf_counter(), time.process_time()
    _ = ctx.judged.rows
    rows = time.perf_counter() - rows[0], time.process_time() - rows[1]
    calibrated = timed(ctx, "judge_calibrated")
    alone = calibrated[0] + rows[0], calibrated[1] + rows[1]
    print(f"model summary (clinicians only):    {summary[0]:.2f} s wall, {summary[1]:.2f} s CPU")
    print(f"judge-calibrated safety, rows built: {calibrated[0]:.2f} s wall,"
          f" {calibrated[1]:.2f} s CPU")
    print(f"judgments' rows (audit/judged.py, built once per audit, shared by every judge"
          f" section): {rows[0]:.2f} s wall, {rows[1]:.2f} s CPU")
    print(f"judge-calibrated safety alone (with the rows build): {alone[0]:.2f} s wall,"
          f" {alone[1]:.2f} s CPU")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"ratio calibrated / summary (target <= 2): {calibrated[1] / summary[1]:.2f} CPU"
          f" ({calibrated[0] / summary[0]:.2f} wall) with the shared rows built;"
          f" {alone[1] / summary[1]:.2f} CPU ({alone[0] / summary[0]:.2f} wall) charged the"
          f" whole rows build; load average {load}")
    print(f"whole command: {time.perf_counter() - start:.1f} s wall,"
          f" {time.process_time():.1f} s CPU (of which making the snapshot {made:.1f} s wall)")

if __name__ == "__main__":
    main()
