"""A source's automated results in the Every Eval Ever schema (0.3.0): per
model, one aggregate file and its instance-level samples file, at the
datastore path the schema's validator requires,
``data/<collection>/<developer>/<model>/<uuid>.json`` and
``<uuid>_samples.jsonl``.

- One evaluation result per judge and criterion (rule, axis or scorer key)
  that judged the model's answers: the mean of its parsed scores, with a
  percentile interval from a bootstrap of cases (a case's answers, samples
  and repeats go together), the standard deviation, n in scores and cases,
  and the unparsed count in ``details``. The scale is the judge kind's:
  rubric -2..+2, jury 1..5, rule 0..1 (share met); a judgment with no kind
  (an imported scorer's own scale) is declared unbounded.
- One instance row per parsed judgment: the case prompt and reference, the
  answer, the score and whether it passes (rubric: above the failure
  threshold, jury: above it on 1..5, rule or scorer: a score of 1, which is
  inspect_ai's CORRECT).
- Pairwise verdicts compare two answers and are not a model's instance
  scores: they are left out, and those on the model's answers (either
  side) counted in its results' details (a model with nothing else gets no
  files).
- ``llm_scoring`` names the judge for judgments a clinieval run made (those
  with a run id); an imported scorer may be no model, so it is not claimed.

The developer directory is the model id's prefix (``openai/gpt-x``) or else
the model's provider, else ``unspecified``; a component the datastore cannot
hold is refused, naming the model. File names are UUID4s derived from the
collection and model, so an export written again replaces its own files.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.errors import InputError
from clinieval.snapshot import Snapshot

SCHEMA_VERSION = "0.3.0"
SCALES = {"rubric": (SCORE_MIN, SCORE_MAX), "jury": (1, 5), "rule": (0, 1)}
"""Each judge kind's score range; a judgment without a kind is unbounded."""
JURY_SHIFT = 3
"""A jury score minus this is on the clinicians' scale (3 maps to 0)."""
_BAD_COMPONENT = re.compile(r'[<>:"\\|?*\x00-\x1f]')
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
             *(f"LPT{i}" for i in range(1, 10))}
UNKNOWN_DEPLOYMENT = {"deployment_type": "unknown", "model_availability": "unknown"}


@dataclass(frozen=True)
class Options:
    """What the export names and how it computes its intervals."""

    collection: str = "clinieval"
    organization: str = "unspecified"
    threshold: int = -1
    bootstrap: int = 2000
    level: float = 0.95
    seed: int = 0


def _text(value: object) -> str | None:
    """A table cell as text, None for a null (pandas reads one as None or NaN)."""
    return value if isinstance(value, str) and value.strip() else None


def _component(value: str, what: str, model: str) -> str:
    value = value.strip().replace(":", "_")
    if (not value or value in {".", "..", "data"} or value.lower() == "unknown" or "/" in value
            or _BAD_COMPONENT.search(value) or value.endswith((".", " "))
            or value.split(".", 1)[0].upper() in _RESERVED):
        raise InputError("models table", f"the {what} cannot be a datastore folder name",
                         row=model, field="model_id", got=value)
    return value


def model_path(model_id: str, provider: str | None) -> tuple[str, str, str]:
    """(developer, model folder, developer stated in model_info) for ``model_id``."""
    parts = model_id.strip().split("/")
    if len(parts) >= 2 and all(parts):
        developer = _component(parts[0], "model id's prefix", model_id)
        return developer, "_".join(_component(p, "model id", model_id) for p in parts[1:]), \
            parts[0]
    stated = (provider or "").strip() or "unspecified"
    return (_component(stated, "model's provider", model_id),
            _component(model_id, "model id", model_id), stated)


def file_uuid(collection: str, model_id: str) -> str:
    digest = hashlib.sha256(f"{collection}\x1f{model_id}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def pass_rule(kind: str | None, threshold: int) -> str:
    """How an instance row's ``is_correct`` is decided, in words (printed in
    each result's ``metric_config``)."""
    if kind == "rubric":
        return f"score > {threshold} (a failure is <= {threshold} on -2..+2)"
    if kind == "jury":
        return f"score - {JURY_SHIFT} > {threshold} (the failure threshold on 1..5)"
    return "score == 1 (met; inspect_ai's CORRECT)"


def _passes(kind: str | None, score: float, threshold: int) -> bool:
    if kind == "rubric":
        return score > threshold
    if kind == "jury":
        return score - JURY_SHIFT > threshold
    return score == 1.0


def _interval(case_codes: np.ndarray, scores: np.ndarray, options: Options,
              rng: np.random.Generator) -> tuple[float, float]:
    from clinieval.stats import cluster_bootstrap_ratio, percentile_ci

    n_cases = int(case_codes.max()) + 1
    if n_cases < 2:
        return math.nan, math.nan
    sums = np.bincount(case_codes, weights=scores, minlength=n_cases)
    counts = np.bincount(case_codes, minlength=n_cases).astype(float)
    reps = cluster_bootstrap_ratio(sums, counts, options.bootstrap, rng)
    lo, hi = percentile_ci(reps, options.level)
    return float(lo), float(hi)


def _metric(kind: str | None, judge: str, criterion: str, judged_by_run: bool,
            options: Options) -> dict:
    lo, hi = SCALES.get(kind, ("-Infinity", "Infinity"))
    label = kind or "scorer"
    scale = f"{lo}..{hi}" if kind in SCALES else "the scorer's own scale"
    config = {"evaluation_description": f"{label} judge {judge!r} on {criterion!r}: mean"
              f" score on {scale}", "metric_id": f"clinieval.{label}.{criterion}",
              "metric_name": f"{criterion} ({label} {judge})", "metric_kind": "mean",
              "metric_unit": "points", "lower_is_better": False, "score_type": "continuous",
              "min_score": lo, "max_score": hi,
              "additional_details": {"is_correct": pass_rule(kind, options.threshold),
                                     "interval": f"{options.level:g} percentile, bootstrap of"
                                     f" cases, {options.bootstrap} replicates, seed"
                                     f" {options.seed}"}}
    if judged_by_run and kind in ("rubric", "jury"):
        config["llm_scoring"] = {
            "judges": [{"model_info": {"name": judge, "id": judge,
                                       "additional_details": dict(UNKNOWN_DEPLOYMENT)}}],
            "input_prompt": f"clinieval's {kind} judge prompt (runs/prompts/{kind}.toml)",
            **({"aggregation_method": "average"} if kind == "jury" else {})}
    return config


def _frames(snap: Snapshot):
    answers = snap["answers"].to_pandas().set_index("answer_id")
    cases = snap["cases"].to_pandas().set_index("case_id")
    rows = snap["judgments"].to_pandas()
    rows["model_id"] = answers["model_id"].reindex(rows["answer_id"]).to_numpy()
    rows["case_id"] = answers["case_id"].reindex(rows["answer_id"]).to_numpy()
    rows["model_b"] = answers["model_id"].reindex(rows["answer_b_id"]).to_numpy()
    return answers, cases, rows


def export_eee(snap: Snapshot, out: Path, options: Options | None = None) -> list[Path]:
    """Write every model's aggregate and samples files under ``out``; their paths."""
    options = options or Options()
    collection = _component(options.collection, "collection", options.collection)
    answers, cases, rows = _frames(snap)
    if rows.empty:
        raise InputError(snap.meta.get("source", "source"), "the source holds no automated"
                         " judgments to export", field="judgments")
    models = snap["models"].to_pandas().set_index("model_id")
    now = str(int(time.time()))
    written: list[Path] = []
    for model_id, mine in rows.groupby("model_id", sort=True):
        info = models.loc[model_id]
        developer, folder, stated = model_path(model_id, _text(info.get("provider")))
        name = file_uuid(collection, model_id)
        base = Path("data") / collection / developer / folder
        samples_rel = (base / f"{name}_samples.jsonl").as_posix()
        evaluation_id = f"{collection}/{developer}_{folder}/{now}"
        compared = int((rows["judge_kind"].eq("pairwise")
                        & (rows["model_id"].eq(model_id) | rows["model_b"].eq(model_id))).sum())
        results, lines = _results(mine, answers, cases, options, model_id, evaluation_id,
                                  compared)
        if not results:  # only pairwise verdicts, or nothing that parsed
            continue
        (out / base).mkdir(parents=True, exist_ok=True)
        samples_text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        (out / samples_rel).write_text(samples_text, "utf-8")
        aggregate = {
            "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id,
            "retrieved_timestamp": now,
            "source_metadata": {"source_name": "clinieval", "source_type": "evaluation_run",
                                "source_organization_name": options.organization,
                                "evaluator_relationship": "third_party"},
            "model_info": {"name": _text(info.get("display_name")) or model_id, "id": model_id,
                           "developer": stated,
                           "additional_details": {**UNKNOWN_DEPLOYMENT,
                                                  **({"version": _text(info.get("version"))}
                                                     if _text(info.get("version")) else {})}},
            "eval_library": {"name": "clinieval", "version": _version()},
            "evaluation_results": results,
            "detailed_evaluation_results": {
                "format": "jsonl", "file_path": samples_rel, "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(samples_text.encode("utf-8")).hexdigest(),
                "total_rows": len(lines)},
        }
        path = out / base / f"{name}.json"
        path.write_text(json.dumps(aggregate, indent=2, ensure_ascii=False) + "\n", "utf-8")
        written += [path, out / samples_rel]
    if not written:
        raise InputError(snap.meta.get("source", "source"), "no model has a parsed judgment"
                         " other than pairwise verdicts to export", field="judgments")
    return written


def _version() -> str:
    from clinieval import __version__

    return __version__


def _results(mine, answers, cases, options: Options, model_id: str, evaluation_id: str,
             compared: int):
    """The model's evaluation results and instance rows; ``compared`` counts
    the pairwise verdicts on its answers (either side), which are left out."""
    results, lines = [], []
    mine = mine.assign(label=mine["judge_kind"].astype(object).fillna("").astype(str))
    pairwise = mine["label"].eq("pairwise")
    scored = mine[~pairwise]
    for (label, judge, criterion), group in scored.groupby(["label", "judge_model",
                                                            "criterion_id"], sort=True):
        kind = label or None
        ok = group[group["parse_status"].eq("ok") & group["score"].notna()]
        if ok.empty:
            continue
        result_id = f"{kind or 'scorer'}/{judge}/{criterion}"
        scores = ok["score"].to_numpy(float)
        codes, _ = _codes(ok["case_id"])
        seed = int.from_bytes(hashlib.sha256(f"{model_id}\x1f{result_id}".encode())
                              .digest()[:4], "big") ^ options.seed
        lo, hi = _interval(codes, scores, options, np.random.default_rng(seed))
        uncertainty = {"standard_deviation": float(scores.std(ddof=1)) if scores.size > 1
                       else 0.0, "num_samples": int(scores.size),
                       "num_bootstrap_samples": options.bootstrap}
        if math.isfinite(lo):
            uncertainty["confidence_interval"] = {
                "lower": lo, "upper": hi, "confidence_level": options.level,
                "method": "percentile bootstrap over cases"}
        details = {"cases": str(int(codes.max()) + 1), "judge": judge,
                   "judge_kind": kind or "none (the scorer's own scale)",
                   "unparsed": str(len(group) - len(ok)),
                   "pairwise_verdicts_left_out": str(compared)}
        results.append({
            "evaluation_result_id": result_id, "evaluation_name": criterion,
            "source_data": {"dataset_name": options.collection, "source_type": "other",
                            "additional_details": {"cases": details["cases"]}},
            "metric_config": _metric(kind, judge, criterion, ok["run_id"].notna().any(),
                                     options),
            "score_details": {"score": float(scores.mean()), "details": details,
                              "uncertainty": uncertainty}})
        lines += [_line(row, answers, cases, options, model_id, evaluation_id, result_id, kind)
                  for row in ok.itertuples(index=False)]
    return results, lines


def _codes(values):
    import pandas as pd

    return pd.factorize(values)


def _line(row, answers, cases, options: Options, model_id: str, evaluation_id: str,
          result_id: str, kind: str | None) -> dict:
    answer = answers.loc[row.answer_id]
    case = cases.loc[row.case_id]
    prompt = _text(case.get("prompt")) or ""
    reference = [r] if (r := _text(case.get("reference_answer"))) else []
    text = answer.get("text") if isinstance(answer.get("text"), str) else ""
    index = answer.get("sample_index")
    sample_hash = hashlib.sha256(("\x1f".join([prompt, *reference])).encode()).hexdigest()
    return {
        "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": model_id,
        "evaluation_name": row.criterion_id, "evaluation_result_id": result_id,
        "sample_id": str(row.case_id), "sample_hash": sample_hash,
        "interaction_type": "single_turn",
        "input": {"raw": prompt, "reference": reference},
        "output": {"raw": [text]},
        "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": text,
                                "extraction_method": "llm_judge" if kind else "custom",
                                "is_terminal": True}],
        "evaluation": {"score": float(row.score),
                       "is_correct": _passes(kind, float(row.score), options.threshold)},
        "metadata": {"answer_id": str(row.answer_id),
                     "sample_index": str(0 if index is None or index != index else int(index)),
                     "judge": str(row.judge_model)},
    }
