"""Each repeat of a juror is asked with its own seed: on a server that honours
seeds, repeats that shared the juror's seed gave the same verdict, so the
run-to-run variance they are for measured nothing. Repeat 0 keeps the juror's
seed, so single runs keep their cache keys."""

from __future__ import annotations

from clinieval.providers import model_spec
from clinieval.runs.data import AnswerText
from clinieval.runs.generate import SAMPLE_SEED_STEP
from clinieval.runs.judges import JUROR_SEED_STEP, JuryJudge


def _jury(seed: int | None, repeats: int) -> JuryJudge:
    generation = {} if seed is None else {"seed": seed}
    spec = model_spec({"id": "judge", "version": "v1", "name": "judge",
                       "base_urls": ["http://127.0.0.1:9/v1"], "generation": generation}, "judge")
    answers = [AnswerText(answer_id="a1", case_id="c1", model_id="m", text="Rest and fluids.",
                          sample_index=0, temperature=None, variant=None)]
    return JuryJudge(spec, answers, {"c1": "A cold: what next?"}, jurors=2, repeats=repeats)


def _seeds(job: JuryJudge) -> dict[tuple[int, int], int]:
    return {(t.info["juror"], t.info["repeat"]): t.calls[0].settings["seed"] for t in job.tasks}


def test_every_juror_and_repeat_has_its_own_seed():
    seeds = _seeds(_jury(7, repeats=3))
    assert seeds == {(j, r): 7 + j * JUROR_SEED_STEP + r * SAMPLE_SEED_STEP
                     for j in range(2) for r in range(3)}
    assert len(set(seeds.values())) == 6


def test_repeat_zero_keeps_the_cache_keys_of_a_single_run():
    single = {t.info["juror"]: t.calls[0].first_key for t in _jury(7, repeats=1).tasks}
    repeated = {t.info["juror"]: t.calls[0].first_key for t in _jury(7, repeats=3).tasks
                if t.info["repeat"] == 0}
    assert single == repeated
