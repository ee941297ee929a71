"""The safety-first audit: analyses composed from :mod:`clinieval.stats`.

The exports are imported on first use, as in the top-level package: the
command line reads the settings' fields to build its options, and the audit
command starts reading the snapshot before pandas, scipy and the sections are
imported.
"""

import importlib

_EXPORTS: dict[str, str] = {
    "AuditResult": "clinieval.audit.result",
    "AuditSettings": "clinieval.audit.settings",
    "Bars": "clinieval.audit.result",
    "Figure": "clinieval.audit.result",
    "Forest": "clinieval.audit.result",
    "Heatmap": "clinieval.audit.result",
    "Histogram": "clinieval.audit.result",
    "Line": "clinieval.audit.result",
    "SECTIONS": "clinieval.audit.run",
    "Scatter": "clinieval.audit.result",
    "Section": "clinieval.audit.result",
    "audit": "clinieval.audit.run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'clinieval.audit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
