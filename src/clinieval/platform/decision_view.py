"""A study's decisions as its pages and API show them: computed by
:func:`clinieval.platform.decisions.compute_study`, cached under the live
view's data version and the gates, certificates filled in off the request
path. (Apart from :mod:`~clinieval.platform.decisions` because it uses the
live view's machinery, which runs the audit, whose decisions section uses
the core.)"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import wait

import sqlalchemy as sa

from clinieval.platform.config import StudyConfig, gates_json
from clinieval.platform.decisions import OPEN, compute_study

_cache: dict[tuple[str, str], tuple] = {}
_lock = threading.Lock()
_computing: set[tuple[str, str]] = set()  # verdicts being computed in the background
_started: dict[tuple[str, str], float] = {}
_certifying: set[tuple[str, str]] = set()


def study_decisions(engine: sa.Engine, cfg: StudyConfig) -> dict:
    """The study's decisions on its current data (JSON-ready), recomputed only
    when ratings or the gates changed.

    Verdicts (a betting sequence per cell) are computed on request while the
    study is small (up to the live view's
    :data:`~clinieval.platform.live.LIVE_EVERY_CHANGE_RATED` rated answers);
    a larger study's are computed like its live view, in the low-priority
    background process, at most every
    :data:`~clinieval.platform.live.LIVE_REFRESH_SECONDS`, and the page shows
    the last result marked ``stale`` (or, before the first, ``pending``):
    at paper scale one computation is seconds of CPU, and done in the
    request it held the server's interpreter on every look at the progress
    page after a submission. The certificates re-run the verdict once per
    candidate removal, seconds per settled cell, so they are always computed
    in the background, one computation per study at a time, and merged in
    when done; until then ``certificates`` says ``computing``."""
    from clinieval.platform.live import LIVE_EVERY_CHANGE_RATED, data_version

    key = (str(engine.url), cfg.study_id)
    rated = data_version(engine, cfg.study_id)
    version = (rated, gates_json(cfg.gates))
    with _lock:
        cached = _cache.get(key)
    if cached and cached[0] == version:
        if cached[1]["certificates"] == "computing":
            _certify_later(engine, cfg, key, version)  # none running: a newer result came
        return cached[1]
    if rated[2] < LIVE_EVERY_CHANGE_RATED:
        with _lock:
            cached = _cache.get(key)
            if cached and cached[0] == version:
                return cached[1]
            result = _verdicts(compute_study(engine, cfg, certify=False))
            _cache[key] = (version, result)
        if result["certificates"] == "computing":
            _certify_later(engine, cfg, key, version)
        return result
    return _in_background(engine, cfg, key, version, cached)


def _verdicts(result: dict) -> dict:
    settled = any(r["verdict"] != OPEN for r in result["decisions"])
    return {**result, "certificates": "computing" if settled else "ready"}


def _in_background(engine: sa.Engine, cfg: StudyConfig, key, version, cached) -> dict:
    """A large study's decisions: start a background computation (not sooner
    than the live view's interval after the last), wait for it a moment,
    else serve the last result, marked stale."""
    from clinieval.platform.live import LIVE_REFRESH_SECONDS, LIVE_WAIT_SECONDS, _pool

    with _lock:
        start = key not in _computing and \
            time.monotonic() - _started.get(key, -math.inf) >= LIVE_REFRESH_SECONDS
        if start:
            _computing.add(key)
            _started[key] = time.monotonic()
    if start:
        url = engine.url.render_as_string(hide_password=False)
        try:
            future = _pool().submit(_compute_in_child, url, cfg, False)
        except RuntimeError:
            with _lock:
                _computing.discard(key)
            future = None

        def done(f) -> None:
            with _lock:
                _computing.discard(key)
                ok = f.exception() is None
                if ok:
                    _cache[key] = (version, _verdicts(f.result()))
            if ok and _cache[key][1]["certificates"] == "computing":
                _certify_later(engine, cfg, key, version)

        if future is not None:
            future.add_done_callback(done)
            wait([future], timeout=LIVE_WAIT_SECONDS)
    with _lock:
        now = _cache.get(key)
    if now and now[0] == version:
        return now[1]
    if now or cached:
        return {**(now or cached)[1], "stale": True}
    return {"gates": [g.model_dump() for g in cfg.gates], "decisions": [], "open": 0,
            "rule": "", "pending": True, "certificates": "computing",
            "summary": "The decisions are being computed; reload in a moment."}


def _compute_in_child(url: str, cfg: StudyConfig, certify: bool) -> dict:
    """The study's decisions (with certificates when ``certify``), in a worker process."""
    from clinieval.storage import db

    engine = db.make_engine(url)
    try:
        return compute_study(engine, cfg, certify=certify)
    finally:
        engine.dispose()


def _certify_later(engine: sa.Engine, cfg: StudyConfig, key, version) -> None:
    """Certificates of the result cached for ``version``, in the background
    (one computation per study at a time: a result that changed meanwhile
    is certified on a later look)."""
    from clinieval.platform.live import _pool

    with _lock:
        if key in _certifying:
            return
        _certifying.add(key)
    url = engine.url.render_as_string(hide_password=False)
    try:
        future = _pool().submit(_compute_in_child, url, cfg, True)
    except RuntimeError:
        with _lock:
            _certifying.discard(key)
        return

    def done(f) -> None:
        with _lock:
            _certifying.discard(key)
            if f.exception() is not None:
                return
            if _cache.get(key, (None,))[0] == version:
                _cache[key] = (version, {**f.result(), "certificates": "ready"})

    future.add_done_callback(done)

