"""The generator's entry points: settings in, snapshot with planted truths out."""

from __future__ import annotations

from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.snapshot import Snapshot
from clinieval.synth.assembly import _draw
from clinieval.synth.design import Progress, SynthSettings, _streams
from clinieval.synth.tables import _tables
from clinieval.synth.truths import _generator_meta, _planted


def generate(seed: int = 0, scale: float = 1.0, *, progress: Progress | None = None) -> Snapshot:
    """A synthetic MOOVE-like snapshot; ``scale=1`` has the paper's exact counts."""
    return generate_from(SynthSettings(seed=seed, scale=scale), progress=progress)


def generate_from(settings: SynthSettings, *, progress: Progress | None = None) -> Snapshot:
    """A synthetic snapshot from explicit settings (see :func:`generate`)."""
    step = progress or _quiet
    step("entities", 0.0)
    rng = _streams(settings.seed)
    rubric = load_rubric()
    world = _draw(rng, settings, rubric.ids, step)
    step("tables", 0.6)
    tables = _tables(world, rng["labels"], rubric_to_rows(rubric))
    step("planted truths", 0.9)
    meta = {"source": "synthetic (clinieval.synth)", "generator": _generator_meta(world),
            "planted": _planted(world, tables),
            "rubric": {"rubric_id": rubric.rubric_id, "version": rubric.version},
            # Synthetic raters are pseudonyms already; exports keep them stable.
            "rater_ids": "pseudonymous"}
    snapshot = Snapshot.from_tables(tables, meta=meta, source="synthetic")
    step("done", 1.0)
    return snapshot


def _quiet(stage: str, fraction: float) -> None:
    """The default progress callback: say nothing."""
