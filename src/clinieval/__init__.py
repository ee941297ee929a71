"""clinieval: safety-first evaluation of medical LLMs.

The supported surface is re-exported here; everything else is internal.
"""

__version__ = "0.1.0"

from clinieval.audit import AuditResult, AuditSettings, audit  # noqa: E402
from clinieval.demo import demo_snapshot  # noqa: E402
from clinieval.errors import ClinievalError, ConfigError, InputError  # noqa: E402
from clinieval.io.bundle import read_bundle, write_bundle  # noqa: E402
from clinieval.io.export import export_snapshot, pseudonymise  # noqa: E402
from clinieval.io.load import import_snapshot, read_source  # noqa: E402
from clinieval.io.validate import validate  # noqa: E402
from clinieval.rubric import CriterionMap, load_criterion_map, load_rubric  # noqa: E402
from clinieval.schema import (  # noqa: E402
    Answer,
    BlindedPairTask,
    BlindedRatingTask,
    Case,
    Criterion,
    Judgment,
    Model,
    Preference,
    Rater,
    Rating,
    Rubric,
    Study,
)
from clinieval.settings import Settings, get_settings  # noqa: E402
from clinieval.snapshot import Snapshot  # noqa: E402
from clinieval.storage.db import load_snapshot, make_engine, read_snapshot, upgrade  # noqa: E402
from clinieval.synth import SynthSettings, generate  # noqa: E402

__all__ = [
    "Answer",
    "AuditResult",
    "AuditSettings",
    "BlindedPairTask",
    "BlindedRatingTask",
    "Case",
    "ClinievalError",
    "ConfigError",
    "Criterion",
    "CriterionMap",
    "InputError",
    "Judgment",
    "Model",
    "Preference",
    "Rater",
    "Rating",
    "Rubric",
    "Settings",
    "Snapshot",
    "Study",
    "SynthSettings",
    "audit",
    "demo_snapshot",
    "export_snapshot",
    "generate",
    "get_settings",
    "import_snapshot",
    "load_criterion_map",
    "load_rubric",
    "load_snapshot",
    "make_engine",
    "pseudonymise",
    "read_bundle",
    "read_snapshot",
    "read_source",
    "upgrade",
    "validate",
    "write_bundle",
]
