"""The safety-first audit: analyses composed from :mod:`clinieval.stats`."""

from clinieval.audit.result import AuditResult, Figure, Section
from clinieval.audit.run import SECTIONS, audit
from clinieval.audit.settings import AuditSettings

__all__ = ["AuditResult", "AuditSettings", "Figure", "SECTIONS", "Section", "audit"]
