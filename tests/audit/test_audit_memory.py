"""Context caches dropped between sections (run.RELEASE_AFTER) are not read
again by a later section: each is computed once per audit."""

from __future__ import annotations

import functools

from clinieval.audit import audit
from clinieval.audit.context import Context
from clinieval.audit.run import RELEASE_AFTER


def test_released_caches_are_computed_once(monkeypatch):
    names = {name for group in RELEASE_AFTER.values() for name in group}
    computed = dict.fromkeys(names, 0)
    for name in names:
        inner = getattr(Context, name).func

        def counted(self, _inner=inner, _name=name):
            computed[_name] += 1
            return _inner(self)

        prop = functools.cached_property(counted)
        prop.__set_name__(Context, name)
        monkeypatch.setattr(Context, name, prop)
    audit("demo", bootstrap=50)
    assert computed == dict.fromkeys(names, 1)
