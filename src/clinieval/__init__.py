"""clinieval: safety-first evaluation of medical LLMs.

The supported surface is re-exported here and imported on first use, so
``import clinieval`` (and the command line) stays quick; everything else is
internal.
"""

from __future__ import annotations

from clinieval._lazy import lazy_exports as _lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Answer": "clinieval.schema",
    "AuditResult": "clinieval.audit",
    "AuditSettings": "clinieval.audit",
    "BlindedPairTask": "clinieval.schema",
    "BlindedRatingTask": "clinieval.schema",
    "Case": "clinieval.schema",
    "ClinievalError": "clinieval.errors",
    "ConfigError": "clinieval.errors",
    "Criterion": "clinieval.schema",
    "CriterionMap": "clinieval.rubric",
    "InputError": "clinieval.errors",
    "Judgment": "clinieval.schema",
    "Model": "clinieval.schema",
    "Preference": "clinieval.schema",
    "Rater": "clinieval.schema",
    "Rating": "clinieval.schema",
    "Rubric": "clinieval.schema",
    "Settings": "clinieval.settings",
    "Snapshot": "clinieval.snapshot",
    "Study": "clinieval.schema",
    "SynthSettings": "clinieval.synth",
    "audit": "clinieval.audit",
    "demo_snapshot": "clinieval.demo",
    "export_snapshot": "clinieval.io.export",
    "generate": "clinieval.synth",
    "get_settings": "clinieval.settings",
    "import_snapshot": "clinieval.io.importer",
    "load_criterion_map": "clinieval.rubric",
    "load_rubric": "clinieval.rubric",
    "make_engine": "clinieval.storage.db",
    "pseudonymise": "clinieval.io.export",
    "read_bundle": "clinieval.io.bundle",
    "read_snapshot": "clinieval.storage.db",
    "read_source": "clinieval.sources",
    "upgrade": "clinieval.storage.db",
    "validate": "clinieval.contract.validate",
    "write_bundle": "clinieval.io.bundle",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = _lazy_exports("clinieval", globals(), _EXPORTS)
