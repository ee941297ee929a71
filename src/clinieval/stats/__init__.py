"""Pure estimators over arrays: numpy/scipy only, no I/O, explicit RNGs.

One module per estimator family; this package re-exports the supported
surface.
"""

from clinieval.stats._errors import ConvergenceError
from clinieval.stats.agreement import (
    category_counts,
    fleiss_kappa,
    fleiss_kappa_weighted,
    krippendorff_alpha,
    krippendorff_alpha_weighted,
    mean_within_item_std,
    ordinal_distance,
    within_item_std,
)
from clinieval.stats.bootstrap import (
    bootstrap_mean_counts,
    bootstrap_proportion_counts,
    cluster_bootstrap_ratio,
    merge_identical_rows,
    percentile_ci,
    resample_counts,
)
from clinieval.stats.bradley_terry import (
    A_WINS,
    B_WINS,
    BOTH_BAD,
    TIE,
    FeatureBTFit,
    RankIntervals,
    bt_bootstrap,
    bt_cluster_bootstrap,
    bt_fit,
    bt_fit_many,
    bt_gradient,
    bt_hessian,
    bt_objective,
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
from clinieval.stats.normal import group_mean_ci, normal_ci, normal_p_value, normal_quantile
from clinieval.stats.proportions import binomial_p_value, wilson_ci
from clinieval.stats.regression import LogisticFit, logistic_irls

__all__ = [
    "A_WINS",
    "BOTH_BAD",
    "B_WINS",
    "ConvergenceError",
    "Correlation",
    "FeatureBTFit",
    "LogisticFit",
    "RankIntervals",
    "TIE",
    "binomial_p_value",
    "bootstrap_mean_counts",
    "bootstrap_proportion_counts",
    "bootstrap_rank_correlation",
    "bt_bootstrap",
    "bt_cluster_bootstrap",
    "bt_fit",
    "bt_fit_many",
    "bt_gradient",
    "bt_hessian",
    "bt_objective",
    "bt_with_features",
    "category_counts",
    "cluster_bootstrap_ratio",
    "cluster_outcome_tables",
    "collapse_votes",
    "fleiss_kappa",
    "fleiss_kappa_weighted",
    "group_mean_ci",
    "krippendorff_alpha",
    "krippendorff_alpha_weighted",
    "length_feature",
    "logistic_irls",
    "mean_within_item_std",
    "merge_identical_rows",
    "normal_ci",
    "normal_p_value",
    "normal_quantile",
    "ordinal_distance",
    "outcome_table",
    "pairwise_response",
    "pearson",
    "percentile_ci",
    "rank_intervals",
    "resample_counts",
    "spearman",
    "vote_credits",
    "wilson_ci",
    "within_item_std",
]
