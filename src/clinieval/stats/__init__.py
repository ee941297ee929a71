"""Pure estimators over arrays: numpy/scipy only, no I/O, explicit RNGs.

One module per estimator family; this package re-exports the supported
surface.
"""

from clinieval.stats._errors import ConvergenceError
from clinieval.stats.agreement import (
    category_counts,
    fleiss_kappa,
    krippendorff_alpha,
    mean_within_item_std,
    within_item_std,
)
from clinieval.stats.bootstrap import (
    bootstrap_mean_counts,
    bootstrap_proportion_counts,
    cluster_bootstrap_ratio,
    percentile_ci,
    resample_counts,
)
from clinieval.stats.bradley_terry import (
    FeatureBTFit,
    RankIntervals,
    bt_bootstrap,
    bt_cluster_bootstrap,
    bt_fit,
    bt_fit_many,
    bt_with_features,
    cluster_outcome_tables,
    collapse_votes,
    length_feature,
    outcome_table,
    pairwise_response,
    rank_intervals,
    vote_credits,
)
from clinieval.stats.correlation import (
    Correlation,
    bootstrap_rank_correlation,
    pearson,
    spearman,
)
from clinieval.stats.crossed import (
    CrossedVariance,
    bt_twoway_bootstrap,
    count_ratio_variance,
    crossed_ratio_bootstrap,
    crossed_ratio_variance,
    crossed_share_variance,
    design_effect,
    influence_variance,
    pigeonhole_totals,
    pigeonhole_weights,
    selected_gap,
    selection_adjusted_gap_ci,
    t_over_z,
    wilson_design_ci,
)
from clinieval.stats.proportions import wilson_ci
from clinieval.stats.regression import LogisticFit, logistic_irls

__all__ = [
    "ConvergenceError",
    "Correlation",
    "CrossedVariance",
    "FeatureBTFit",
    "LogisticFit",
    "RankIntervals",
    "bootstrap_mean_counts",
    "bootstrap_proportion_counts",
    "bootstrap_rank_correlation",
    "bt_bootstrap",
    "bt_cluster_bootstrap",
    "bt_fit",
    "bt_fit_many",
    "bt_twoway_bootstrap",
    "bt_with_features",
    "category_counts",
    "cluster_bootstrap_ratio",
    "cluster_outcome_tables",
    "collapse_votes",
    "count_ratio_variance",
    "crossed_ratio_bootstrap",
    "crossed_ratio_variance",
    "crossed_share_variance",
    "design_effect",
    "fleiss_kappa",
    "influence_variance",
    "krippendorff_alpha",
    "length_feature",
    "logistic_irls",
    "mean_within_item_std",
    "outcome_table",
    "pairwise_response",
    "pearson",
    "percentile_ci",
    "pigeonhole_totals",
    "pigeonhole_weights",
    "rank_intervals",
    "resample_counts",
    "selected_gap",
    "selection_adjusted_gap_ci",
    "spearman",
    "t_over_z",
    "vote_credits",
    "wilson_ci",
    "wilson_design_ci",
    "within_item_std",
]
