"""Benchmarks as data: a benchmark file (TOML) names its cases, its Jinja2
prompt, the answer's format, its scorers and its place in the MedHELM
taxonomy; ``clinieval run`` generates, scores and stores per-instance
results the audit reads."""

from clinieval.tasks.scorers import Scored, scorer
from clinieval.tasks.spec import Benchmark, load_benchmark, parse_benchmark

__all__ = ["Benchmark", "Scored", "load_benchmark", "parse_benchmark", "scorer"]
