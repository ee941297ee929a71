"""The audit context: the snapshot's data, the settings, a random stream per
purpose and the analysed criteria, with the count arrays
(:mod:`~clinieval.audit.counts`), the definition of failure
(:mod:`~clinieval.audit.failure`) and the bootstrap design
(:mod:`~clinieval.audit.design`) and the judgments' rows
(:mod:`~clinieval.audit.judged`) computed once per audit and shared by the
sections.

A section's random numbers come from ``rng(purpose)``: they do not depend on
which other sections ran or in what order.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from clinieval.audit import judged
from clinieval.audit.counts import RatingCounts
from clinieval.audit.data import AuditData
from clinieval.audit.design import BootstrapDesign
from clinieval.audit.failure import Failure
from clinieval.audit.settings import AuditSettings
from clinieval.stats import percentile_ci


@dataclass
class Context(RatingCounts, Failure, BootstrapDesign):
    """One audit's shared state: the data, the settings, a random stream per
    purpose and the analysed criteria here; the count arrays, failure and the
    bootstrap design from the classes it composes (one module each), cached
    on first use."""

    data: AuditData
    settings: AuditSettings

    def __post_init__(self) -> None:
        # The judgments' rows, built once when a judge section first reads
        # them and shared by every judge section while this context lives
        # (judged.judged finds them by the judge tables' identity).
        self.judged = judged.shared(self.data.judge_tables)

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator per purpose, so a section's numbers do not depend on
        which other sections ran or in what order."""
        return np.random.default_rng([self.settings.seed, zlib.crc32(purpose.encode())])

    def ci(self, replicates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return percentile_ci(replicates, self.settings.level)

    @cached_property
    def criteria(self) -> list[int]:
        """Indices of the analysed criteria, in rubric order: by default every
        criterion that has ratings."""
        chosen = self.settings.criteria
        if chosen is None:
            rated = np.bincount(self.data.rating_criterion, minlength=self.data.n_criteria)
            return [c for c in range(self.data.n_criteria) if rated[c] > 0]
        unknown = [c for c in chosen if c not in self.data.criteria]
        if unknown:
            from clinieval.errors import ClinievalError

            raise ClinievalError(f"--criteria names unknown criteria {unknown};"
                                 f" the snapshot has {self.data.criteria}")
        return [self.data.criteria.index(c) for c in chosen]

    @cached_property
    def safety(self) -> list[int]:
        return [c for c in self.criteria if self.data.safety_critical[c]]

    def name(self, criterion: int) -> str:
        return self.data.criterion_names[criterion]

    def why_unanalysed(self, criteria: list[int]) -> str:
        """Why none of ``criteria`` (rubric indices) is analysed: the
        criteria setting leaves them out, or they have no ratings."""
        names = ", ".join(self.name(c) for c in criteria)
        one = len(criteria) == 1
        chosen = self.settings.criteria
        if chosen is not None and not any(self.data.criteria[c] in chosen for c in criteria):
            return f"{names} {'is' if one else 'are'} not among the analysed criteria (--criteria)"
        return f"{names} {'has' if one else 'have'} no ratings"

    @cached_property
    def why_no_safety(self) -> str:
        """Why no safety-critical criterion is analysed (see :attr:`safety`)."""
        flagged = [c for c in range(self.data.n_criteria) if self.data.safety_critical[c]]
        if not flagged:
            return "the rubric flags no criterion as safety-critical."
        return f"no safety-critical criterion can be analysed: {self.why_unanalysed(flagged)}."
