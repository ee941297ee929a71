"""Indicator, taxonomy and benchmark files: the defaults hold the counts the
papers give, and a bad file fails naming the file and the field."""

from __future__ import annotations

import json

import pytest

from clinieval.catalogs import load_benchmarks, load_indicators, load_taxonomy
from clinieval.errors import InputError


def test_default_indicators_follow_csedb_counts():
    indicators = load_indicators().indicators
    safety = [i for i in indicators if i.gate == "safety"]
    effectiveness = [i for i in indicators if i.gate == "effectiveness"]
    assert (len(safety), len(effectiveness)) == (17, 13)
    # 8 binary safety (absolute contraindications), 5 binary effectiveness
    assert sum(i.scoring == "binary" for i in safety) == 8
    assert sum(i.scoring == "binary" for i in effectiveness) == 5
    assert all(1 <= i.weight <= 5 for i in indicators)


def test_default_taxonomy_has_five_categories_and_22_subcategories():
    taxonomy = load_taxonomy()
    assert len(taxonomy.categories) == 5
    assert len(taxonomy.parent()) == 22


def test_example_registry_places_every_benchmark_in_the_taxonomy():
    registry = load_benchmarks()
    parent = load_taxonomy().parent()
    assert all(parent[b.subcategory] == b.category for b in registry.benchmarks)
    jury = next(b for b in registry.benchmarks if b.metric == "jury")
    assert jury.normalisation.apply(3) == pytest.approx(0.5)  # (3 - 1) / (5 - 1)


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data), "utf-8")
    return path


def test_a_weight_out_of_range_names_file_and_field(tmp_path):
    data = json.loads(json.dumps(load_indicators().model_dump()))
    data["indicators"][3]["weight"] = 7
    path = _write(tmp_path, "ind.json", data)
    with pytest.raises(InputError) as err:
        load_indicators(path)
    assert "ind.json" in str(err.value) and "indicators[3].weight" in str(err.value)


def test_a_duplicate_indicator_is_refused(tmp_path):
    data = json.loads(json.dumps(load_indicators().model_dump()))
    data["indicators"][1]["indicator_id"] = data["indicators"][0]["indicator_id"]
    with pytest.raises(InputError, match="duplicate indicator_id"):
        load_indicators(_write(tmp_path, "dup.json", data))


def test_a_benchmark_in_the_wrong_category_names_the_field(tmp_path):
    data = json.loads(json.dumps(load_benchmarks().model_dump()))
    data["benchmarks"][2]["category"] = "note_generation"
    with pytest.raises(InputError) as err:
        load_benchmarks(_write(tmp_path, "bench.json", data))
    assert "bench.json" in str(err.value) and "benchmarks[2].subcategory" in str(err.value)


def test_an_unknown_metric_is_refused(tmp_path):
    data = json.loads(json.dumps(load_benchmarks().model_dump()))
    data["benchmarks"][0]["metric"] = "bleu"
    with pytest.raises(InputError) as err:
        load_benchmarks(_write(tmp_path, "m.json", data))
    assert "benchmarks[0].metric" in str(err.value)
