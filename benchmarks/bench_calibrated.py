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
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the audit command runs

import argparse
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.run import build
from clinieval.audit.settings import AuditSettings
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.snapshot import Snapshot
from clinieval.synth import generate

JUDGES = (("bench-rubric-judge", 0.5), ("bench-rubric-judge-b", 0.8))  # (model, noise SD)


def judged_snapshot(scale: float, share: float, seed: int, judges: int = 2) -> Snapshot:
    """The snapshot with ratings on ``share`` of the answers and ``judges``
    rubric judges on all of them."""
    snap = generate(seed, scale)
    rng = np.random.default_rng([seed, 32])
    ratings = snap["ratings"].select(["answer_id", "criterion_id", "score"]).to_pandas()
    means = ratings.groupby(["answer_id", "criterion_id"], sort=True)["score"].mean()
    index = means.index.to_frame(index=False)
    parts = []
    for model, noise in JUDGES[:judges]:
        score = np.clip(np.round(means.to_numpy() + noise * rng.standard_normal(means.size)),
                        SCORE_MIN, SCORE_MAX)
        parts.append(pd.DataFrame({
            "run_id": "bench", "answer_id": index["answer_id"], "judge_model": model,
            "judge_kind": "rubric", "criterion_id": index["criterion_id"], "parse_status": "ok",
            "juror": 0, "repeat": 0, "score": score,
            "created_at": pd.Timestamp("2025-09-01", tz="UTC")}))
    frame = pd.concat(parts, ignore_index=True)
    frame.insert(0, "judgment_id", np.arange(1, len(frame) + 1))
    schema = snap["judgments"].schema
    for name in schema.names:
        if name not in frame:
            frame[name] = None
    answers = snap["answers"].column("answer_id").to_numpy()
    kept = rng.choice(answers, int(share * answers.size), replace=False)
    tables = dict(snap.tables)
    tables["judgments"] = pa.Table.from_pandas(frame[schema.names], schema=schema,
                                               preserve_index=False)
    tables["ratings"] = snap["ratings"].filter(pc.is_in(snap["ratings"]["answer_id"],
                                                        pa.array(kept)))
    return Snapshot.from_tables(tables, snap.meta)


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
    args = parser.parse_args()
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
