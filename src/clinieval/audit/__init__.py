"""The safety-first audit: analyses composed from :mod:`clinieval.stats`.

The exports are imported on first use, as in the top-level package: the
command line reads the settings' fields to build its options, and the audit
command starts reading the snapshot before pandas, scipy and the sections are
imported.
"""

from clinieval._lazy import lazy_exports as _lazy_exports

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


__getattr__, __dir__ = _lazy_exports("clinieval.audit", globals(), _EXPORTS)
