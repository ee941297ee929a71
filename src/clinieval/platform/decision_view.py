"""A study's decisions as its pages and API show them: computed by
:func:`clinieval.platform.decisions.compute_study`, cached under the live
view's data version and the gates, certificates filled in off the request
path. (Apart from :mod:`~clinieval.platform.decisions` because it uses the
live view's machinery, which runs the audit, whose decisions section uses
the core.)"""

from __future__ import annotations

import threading

import sqlalchemy as sa

from clinieval.platform.config import StudyConfig, gates_json
from clinieval.platform.decisions import OPEN, compute_study

_cache: dict[tuple[str, str], tuple] = {}
_lock = threading.Lock()


def study_decisions(engine: sa.Engine, cfg: StudyConfig) -> dict:
    """The study's decisions on its current data (JSON-ready), recomputed only
    when ratings or the gates changed.

    Verdicts are computed on request (a betting sequence per cell: fast).
    The certificates re-run the verdict once per candidate removal, seconds
    per settled cell, so they are computed off the request path, in the live
    view's low-priority background process, and merged in when done; until
    then ``certificates`` says ``computing``."""
    from clinieval.platform.live import data_version

    key = (str(engine.url), cfg.study_id)
    version = (data_version(engine, cfg.study_id), gates_json(cfg.gates))
    with _lock:
        cached = _cache.get(key)
        if cached and cached[0] == version:
            return cached[1]
        result = compute_study(engine, cfg, certify=False)
        settled = any(r["verdict"] != OPEN for r in result["decisions"])
        result["certificates"] = "computing" if settled else "ready"
        _cache[key] = (version, result)
    if settled:
        _certify_later(engine, cfg, key, version)
    return result


def _certify_later(engine: sa.Engine, cfg: StudyConfig, key, version) -> None:
    from clinieval.platform.live import _pool

    url = engine.url.render_as_string(hide_password=False)
    future = _pool().submit(_certify_in_child, url, cfg)

    def done(f) -> None:
        if f.exception() is not None:
            return
        with _lock:
            if _cache.get(key, (None,))[0] == version:
                _cache[key] = (version, {**f.result(), "certificates": "ready"})

    future.add_done_callback(done)


def _certify_in_child(url: str, cfg: StudyConfig) -> dict:
    from clinieval.storage import db

    engine = db.make_engine(url)
    try:
        return compute_study(engine, cfg, certify=True)
    finally:
        engine.dispose()
