"""Which benchmarks are defined: the bundled examples
(``clinieval/data/benchmarks``) and the user's folder (``--folder``, else
``$CLINIEVAL_BENCHMARKS``, else ``./benchmarks``), every ``*.toml``,
``*.yaml`` and ``*.yml`` there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from clinieval.errors import InputError
from clinieval.tasks.spec import SUFFIXES, Benchmark, load_benchmark

ENV = "CLINIEVAL_BENCHMARKS"


def bundled_folder() -> Path:
    return Path(str(resources.files("clinieval.data").joinpath("benchmarks")))


def user_folder(folder: str | Path | None = None) -> Path:
    return Path(folder or os.environ.get(ENV) or "benchmarks")


@dataclass(frozen=True)
class Entry:
    """A benchmark file found: where, and the benchmark or why it is unreadable."""

    path: Path
    origin: str
    bench: Benchmark | None
    problem: str | None = None


def entries(folder: str | Path | None = None) -> list[Entry]:
    """Every benchmark file, bundled first; an unreadable one with its error."""
    found = []
    for origin, where in (("bundled", bundled_folder()), ("user", user_folder(folder))):
        if not where.is_dir():
            continue
        for path in sorted(p for p in where.iterdir() if p.suffix in SUFFIXES):
            try:
                found.append(Entry(path, origin, load_benchmark(path)))
            except InputError as err:
                found.append(Entry(path, origin, None, str(err)))
    return found


def find(name: str, folder: str | Path | None = None) -> Benchmark:
    """A benchmark by file path, else by id (the user's folder wins over
    the bundled examples)."""
    path = Path(name)
    if path.suffix in SUFFIXES or path.is_file():
        return load_benchmark(path)
    known = [e for e in entries(folder) if e.bench is not None and e.bench.id == name]
    if not known:
        ids = sorted({e.bench.id for e in entries(folder) if e.bench is not None})
        raise InputError(name, "no such benchmark file or id", expected="a .toml or .yaml"
                         " file, or one of " + (", ".join(ids) or "(none)"))
    return sorted(known, key=lambda e: e.origin == "bundled")[0].bench
