"""Intervals for crossed designs: raters x cases.

Clinician ratings are crossed: each case is rated by several raters and each
rater rates many cases (of many models). Rater leniency and case difficulty
both make ratings correlated, so resampling individual ratings understates
the uncertainty, and resampling either raters or cases alone still misses
the other source.

The **pigeonhole bootstrap** (McCullagh, 2000, Bernoulli 6:285; Owen, 2007,
Ann. Appl. Stat. 1:246) resamples the rows (raters) and the columns (cases)
of the rater x case table independently with replacement: rater ``r`` is
drawn ``U_r`` times and case ``c`` is drawn ``V_c`` times, so the cell
``(r, c)`` enters the replicate ``U_r * V_c`` times. Here this is done as
weights on cells of sufficient statistics, vectorised over replicates.

Owen (2007) shows the pigeonhole variance is conservative. For a ratio mean
with centred linearised contributions ``z`` its expectation is::

    (1 - 1/C) S_rows + (1 - 1/R) S_cols + S_cells

where ``S_rows = sum_r (sum of z over rater r)**2`` and likewise for cases
and for cells: each cell's own variation (the rater x case interaction and
the rating noise) is counted three times, and in a sparse design (three
raters per case) the case variation is counted again inside the rater sums.
That widens intervals by about a quarter. The variance a crossed design
needs is the two-way cluster-robust one (Cameron, Gelbach & Miller, 2011,
J. Bus. Econ. Stat. 29:238)::

    V = c_R S_rows + c_C S_cols - c_K S_cells,     c_G = G / (G - 1)

so :func:`crossed_ratio_bootstrap` scales each statistic's replicate
deviations from the estimate by ``sqrt(V / pigeonhole variance)``: the
replicates keep the pigeonhole's shape and its correlation between
statistics (raters shared by models), with the two-way variance.

The package holds one module per part: ``codes`` (distinct codes),
``variance`` (the designs' variances from influences), ``grouped`` (the same
from bincounts over runs, at 100x scale), ``pigeonhole`` (the replicates'
draws and totals), ``bootstrap`` (replicates scaled to the two-way
variance) and ``design`` (design effects and their intervals). The
Bradley-Terry two-way bootstrap sits with the other fits in
:mod:`clinieval.stats.bradley_terry`.
"""

from clinieval.stats.crossed.bootstrap import crossed_ratio_bootstrap, crossed_ratio_replicates
from clinieval.stats.crossed.codes import unique_codes
from clinieval.stats.crossed.design import design_effect, t_over_z, wilson_design_ci
from clinieval.stats.crossed.grouped import (
    crossed_share_variance,
    crossed_unit_variance,
    grouped_ratio_variance,
)
from clinieval.stats.crossed.pigeonhole import pigeonhole_totals, pigeonhole_weights
from clinieval.stats.crossed.variance import (
    CrossedVariance,
    count_ratio_variance,
    crossed_ratio_variance,
    influence_variance,
)

__all__ = [
    "CrossedVariance",
    "count_ratio_variance",
    "crossed_ratio_bootstrap",
    "crossed_ratio_replicates",
    "crossed_ratio_variance",
    "crossed_share_variance",
    "crossed_unit_variance",
    "design_effect",
    "grouped_ratio_variance",
    "influence_variance",
    "pigeonhole_totals",
    "pigeonhole_weights",
    "t_over_z",
    "unique_codes",
    "wilson_design_ci",
]
